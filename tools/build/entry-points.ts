/**
 * The files a package.json names as its entry points: `main`, `types`, every path of `typesVersions`
 * and every leaf of `exports`, under every condition (the private `mcp-subscriptions-source` one
 * included: it names sources the package ships). A package that lacks one of them installs fine and
 * fails in its user's app, so the build checks them (`check-entry-points.ts`, run by `prepack`) and so
 * does the test of the packed tarball (test/system/package.test.ts).
 */

/** The fields of package.json that name entry points. */
export interface EntryManifest {
  readonly main?: string;
  readonly types?: string;
  readonly typings?: string;
  readonly typesVersions?: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>>;
  readonly exports?: unknown;
}

/** An entry point: the file, package-relative without `./`, and where package.json names it. */
export interface EntryPoint {
  readonly file: string;
  /** `main`, `types`, `typesVersions["*"].express`, `exports["./express"].require.types`, … */
  readonly from: string;
}

const relative = (target: string): string => target.replace(/^\.\//, '');

/** Every leaf of an `exports` value (a string, a conditions object, or an array of fallbacks). */
function exportLeaves(value: unknown, from: string): EntryPoint[] {
  if (typeof value === 'string') return [{ file: relative(value), from }];
  if (Array.isArray(value)) return value.flatMap((inner, index) => exportLeaves(inner, `${from}[${index}]`));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).flatMap(([key, inner]) => exportLeaves(inner, `${from}[${JSON.stringify(key)}]`));
  }
  return []; // null: a subpath deliberately left out
}

/** Every entry point `manifest` names, in the order it names them. A `*` pattern is not expanded. */
export function entryPoints(manifest: EntryManifest): EntryPoint[] {
  const named: EntryPoint[] = [];
  for (const field of ['main', 'types', 'typings'] as const) {
    const target = manifest[field];
    if (target !== undefined) named.push({ file: relative(target), from: field });
  }
  for (const [range, paths] of Object.entries(manifest.typesVersions ?? {})) {
    for (const [subpath, targets] of Object.entries(paths)) {
      for (const target of targets) {
        named.push({
          file: relative(target),
          from: `typesVersions[${JSON.stringify(range)}][${JSON.stringify(subpath)}]`,
        });
      }
    }
  }
  named.push(...exportLeaves(manifest.exports, 'exports'));
  return named;
}

/** The entry points of `manifest` for which `has(file)` is false. */
export function missingEntryPoints(manifest: EntryManifest, has: (file: string) => boolean): EntryPoint[] {
  return entryPoints(manifest).filter(({ file }) => !has(file));
}
