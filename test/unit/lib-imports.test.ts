/**
 * The shape of lib/ and adapters/: their modules form no import circle, type-only imports included,
 * and lib/types.ts (the public type sheet) is a leaf that imports no file of ours. A circle lets a
 * module reach back up the data flow (the style's "no module reaches back up this chain"), and one
 * through a type sheet makes every module that takes a shape from it part of the circle. ESLint has no
 * cycle rule here (eslint-plugin-import is not a dependency): this test is the guard.
 */
import { describe, expect, test } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The folders whose import graph is checked: the engine and every adapter (each may import lib/). */
const FOLDERS = ['lib', 'adapters'];

/**
 * Every relative module specifier `text` names: `import`, `import type`, `export … from`, `export *
 * from`, a side-effect `import './x.ts'`, `import('./x.ts')` and `typeof import('./x.ts')`. Read with
 * the TypeScript parser, so that comments and strings that merely look like imports are not counted.
 */
function relativeImports(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    let specifier: ts.Node | undefined;
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) specifier = node.moduleSpecifier;
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) specifier = node.argument.literal;
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      specifier = node.arguments[0];
    }
    if (specifier !== undefined && ts.isStringLiteral(specifier) && specifier.text.startsWith('.')) {
      found.push(specifier.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every `.ts` file under `folder` (repository-relative, `/`-separated), sorted. */
function sourcesUnder(folder: string): string[] {
  return readdirSync(path.join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.posix.join(folder, file.split(path.sep).join('/')))
    .sort();
}

/** The import graph of `FOLDERS`: each file (repository-relative) to the files of ours it imports. */
function sourceGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of FOLDERS.flatMap(sourcesUnder)) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    graph.set(
      file,
      relativeImports(file, text).map((specifier) => path.posix.join(path.posix.dirname(file), specifier)),
    );
  }
  return graph;
}

/** The first import circle found, as a path that starts and ends with the same file; or `undefined`. */
function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const onPath: string[] = [];
  const visit = (file: string): string[] | undefined => {
    const at = onPath.indexOf(file);
    if (at !== -1) return [...onPath.slice(at), file];
    if (done.has(file)) return undefined;
    onPath.push(file);
    for (const next of graph.get(file) ?? []) {
      const cycle = visit(next);
      if (cycle !== undefined) return cycle;
    }
    onPath.pop();
    done.add(file);
    return undefined;
  };
  for (const file of graph.keys()) {
    const cycle = visit(file);
    if (cycle !== undefined) return cycle;
  }
  return undefined;
}

describe('the import reader', () => {
  test('finds every form of relative import, and nothing in comments or strings', () => {
    const text = [
      "import { a } from './a.ts';",
      "import type { B } from './b.ts';",
      'import {',
      '  c,',
      '  type C,',
      "} from './c.ts';",
      "export * from './d.ts';",
      "export { e } from './e.ts';",
      "export type { F } from './f.ts';",
      "import './g.ts';",
      "const h = await import('./h.ts');",
      "type I = typeof import('./i.ts');",
      "import { readFileSync } from 'node:fs';",
      "// import { x } from './not-a.ts';",
      'const s = "import { y } from \'./not-b.ts\'";',
    ].join('\n');
    expect(relativeImports('sample.ts', text)).toStrictEqual([
      './a.ts',
      './b.ts',
      './c.ts',
      './d.ts',
      './e.ts',
      './f.ts',
      './g.ts',
      './h.ts',
      './i.ts',
    ]);
  });

  test('finds a circle, type-only or not, and none in a tree', () => {
    expect(
      findCycle(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', ['a.ts']],
        ]),
      ),
    ).toStrictEqual(['a.ts', 'b.ts', 'c.ts', 'a.ts']);
    expect(
      findCycle(
        new Map([
          ['a.ts', ['b.ts', 'c.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', []],
        ]),
      ),
    ).toBeUndefined();
  });
});

describe('lib/ and adapters/ imports', () => {
  const graph = sourceGraph();

  test('every relative import names a file of lib/ or adapters/ (the graph is complete)', () => {
    for (const [file, imports] of graph) {
      for (const target of imports)
        expect({ file, target, known: graph.has(target) }).toStrictEqual({ file, target, known: true });
    }
    // The reader sees the engine's edges and the adapters': the hub imports the stream it fans out to,
    // the client its errors, and every adapter reaches lib/ through its doors.
    expect(graph.get('lib/subscription-hub.ts')).toContain('lib/listen-stream.ts');
    expect(graph.get('adapters/client/subscription.ts')).toContain('adapters/client/errors.ts');
    expect(graph.get('adapters/express/index.ts')).toContain('lib/internal.ts');
  });

  test('form no import circle, type-only imports included', () => {
    const cycle = findCycle(graph);
    expect(cycle === undefined ? 'no circle' : cycle.join(' → ')).toBe('no circle');
  });

  test('lib/types.ts, the public type sheet, imports no file of ours', () => {
    expect(graph.get('lib/types.ts')).toStrictEqual([]);
  });
});
