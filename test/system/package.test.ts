/**
 * The package as published (issue #9): the tarball `npm pack` makes (which runs the build), its
 * manifest and its files, and consumer projects compiled against it in every module mode users run.
 *
 * Each consumer in test/consumers/<name> is a project of its own (package.json, tsconfig.json, one
 * source file that takes a value and a type from each entry). The tarball is unpacked into its own
 * node_modules; express, Nest and @types/node come from the repository's node_modules through Node's
 * and TypeScript's upward lookup. It is compiled with the repository's TypeScript 5 and with
 * TypeScript 7 (what `npm i typescript` installs since 7.0), each of which must load only the build's
 * declarations, then each output is run with node, and it prints where each entry resolved. Where
 * TypeScript 7 no longer accepts a tsconfig (moduleResolution node10, the `nest new` one as
 * generated), the test checks that it refuses it with exactly the errors the README's advice answers.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { entryPoints } from '../../tools/build/entry-points.ts';
import { installPacked, packPackage, PACK_TIMEOUT_MS, type Packed } from '../helpers/pack.ts';
import { REPO_ROOT } from '../helpers/sample-app.ts';

const CONSUMERS = path.join(REPO_ROOT, 'test', 'consumers');
/** A consumer's two compiles (with full lib checking) and its run: tens of seconds on a busy machine. */
const CONSUMER_TIMEOUT_MS = 180_000;

const ENTRIES = {
  '.': 'lib/index',
  './express': 'adapters/express/index',
  './fastify': 'adapters/fastify/index',
  './nest': 'adapters/nest/index',
  './redis': 'adapters/redis/index',
  './postgres': 'adapters/postgres/index',
  './client': 'adapters/client/index',
} as const;

interface Manifest {
  name: string;
  license?: string;
  keywords?: string[];
  homepage?: string;
  bugs?: { url?: string };
  repository?: { type?: string; url?: string };
  main?: string;
  types?: string;
  typesVersions?: Record<string, Record<string, string[]>>;
  exports: Record<string, unknown>;
}

let packed: Packed | undefined;
let unpacked = '';
let files: string[] = [];
let manifest: Manifest;

beforeAll(() => {
  packed = packPackage();
  unpacked = mkdtempSync(path.join(tmpdir(), 'mcp-subscriptions-unpacked-'));
  files = execFileSync('tar', ['-tzf', packed.tarball], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line !== '' && !line.endsWith('/'))
    .map((line) => line.replace(/^package\//, ''))
    .sort();
  installPacked(packed.tarball, unpacked);
  manifest = JSON.parse(readFileSync(path.join(unpacked, 'node_modules', 'mcp-subscriptions', 'package.json'), 'utf8'));
}, PACK_TIMEOUT_MS);

afterAll(() => {
  packed?.dispose();
  if (unpacked !== '') rmSync(unpacked, { recursive: true, force: true });
});

/** Every leaf of an `exports` value, with the conditions that lead to it. */
function exportTargets(value: unknown, conditions: string[] = []): { conditions: string[]; target: string }[] {
  if (typeof value === 'string') return [{ conditions, target: value }];
  return Object.entries(value as Record<string, unknown>).flatMap(([key, inner]) =>
    exportTargets(inner, [...conditions, key]),
  );
}

describe('the published manifest', () => {
  it('names no condition that leads to sources except our own, which no other tooling sets', () => {
    const leaves = Object.entries(manifest.exports).flatMap(([subpath, value]) =>
      exportTargets(value).map((leaf) => ({ subpath, ...leaf })),
    );
    const toSources = leaves.filter(({ target }) => target.endsWith('.ts') && !target.endsWith('.d.ts'));
    expect(toSources.map(({ subpath, conditions, target }) => [subpath, conditions, target])).toStrictEqual([
      ['.', ['mcp-subscriptions-source'], './lib/index.ts'],
      ['./express', ['mcp-subscriptions-source'], './adapters/express/index.ts'],
      ['./fastify', ['mcp-subscriptions-source'], './adapters/fastify/index.ts'],
      ['./nest', ['mcp-subscriptions-source'], './adapters/nest/index.ts'],
      ['./redis', ['mcp-subscriptions-source'], './adapters/redis/index.ts'],
      ['./postgres', ['mcp-subscriptions-source'], './adapters/postgres/index.ts'],
      ['./client', ['mcp-subscriptions-source'], './adapters/client/index.ts'],
    ]);
    const conditions = new Set(leaves.flatMap((leaf) => leaf.conditions));
    expect([...conditions].sort()).toStrictEqual(['default', 'mcp-subscriptions-source', 'require', 'types']);
  });

  it('exports types first in each condition block: require to the CommonJS build, the rest to the ES module build', () => {
    for (const [subpath, source] of Object.entries(ENTRIES)) {
      const block = manifest.exports[subpath] as Record<string, unknown>;
      expect(block).toStrictEqual({
        'mcp-subscriptions-source': `./${source}.ts`,
        require: { types: `./dist/cjs/${source}.d.ts`, default: `./dist/cjs/${source}.js` },
        types: `./dist/${source}.d.ts`,
        default: `./dist/${source}.js`,
      });
      expect(Object.keys(block)).toStrictEqual(['mcp-subscriptions-source', 'require', 'types', 'default']);
      expect(Object.keys(block.require as object)).toStrictEqual(['types', 'default']);
    }
  });

  it('has main, types and typesVersions for moduleResolution node10, all on the CommonJS build', () => {
    expect(manifest.main).toBe('./dist/cjs/lib/index.js');
    expect(manifest.types).toBe('./dist/cjs/lib/index.d.ts');
    expect(manifest.typesVersions).toStrictEqual({
      '*': {
        express: ['./dist/cjs/adapters/express/index.d.ts'],
        fastify: ['./dist/cjs/adapters/fastify/index.d.ts'],
        nest: ['./dist/cjs/adapters/nest/index.d.ts'],
        redis: ['./dist/cjs/adapters/redis/index.d.ts'],
        postgres: ['./dist/cjs/adapters/postgres/index.d.ts'],
        client: ['./dist/cjs/adapters/client/index.d.ts'],
      },
    });
  });

  it('names only files that are in the tarball: every exports condition, main, types and typesVersions', () => {
    // The repository's package.json too: a pack that skipped or lost the build still ships it unchanged.
    const repository = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as Manifest;
    for (const named of [manifest, repository]) {
      const entries = entryPoints(named);
      expect(entries.length).toBeGreaterThan(Object.keys(ENTRIES).length * 4); // each entry's four builds, at least
      expect(entries.filter(({ file }) => !files.includes(file))).toStrictEqual([]);
    }
  });

  it('says where the project lives, so the registry page links to it (and resolves the README’s relative links)', () => {
    const repo = 'https://github.com/mcp-subscriptions/mcp-subscriptions';
    expect(manifest.repository).toStrictEqual({ type: 'git', url: `git+${repo}.git` });
    expect(manifest.homepage).toBe(`${repo}#readme`);
    expect(manifest.bugs).toStrictEqual({ url: `${repo}/issues` });
    expect(manifest.license).toBe('MIT');
    expect(manifest.keywords).toEqual(
      expect.arrayContaining(['mcp', 'model-context-protocol', 'sse', 'express', 'nestjs', 'redis']),
    );
  });
});

describe('the published files', () => {
  it('are the two builds, the sources their maps point to, the README, the licence and the manifest: nothing else', () => {
    const unexpected = files.filter(
      (file) =>
        !/^dist\/(cjs\/)?(lib|adapters\/(express|fastify|nest|redis|postgres|client))\/[a-z-.]+\.(js|js\.map|d\.ts)$/.test(
          file,
        ) &&
        !/^(lib|adapters\/(express|fastify|nest|redis|postgres|client))\/[a-z-.]+\.ts$/.test(file) &&
        !['dist/cjs/package.json', 'README.md', 'LICENSE', 'package.json'].includes(file),
    );
    expect(unexpected).toStrictEqual([]);
    for (const folder of ['test/', 'sample-app/', 'bench/', 'tools/', 'docs/', '.ci/', 'node_modules/']) {
      expect(files.filter((file) => file.startsWith(folder))).toStrictEqual([]);
    }
    expect(files.filter((file) => /tsconfig|\.tsbuildinfo$/.test(file))).toStrictEqual([]);
    expect(files).toEqual(expect.arrayContaining(['README.md', 'LICENSE', 'package.json', 'dist/cjs/package.json']));
  });

  it('hold, for every source file, its JavaScript, declarations and map in both builds', () => {
    const sources = files.filter((file) => /^(lib|adapters)\/.*\.ts$/.test(file));
    expect(sources).toEqual(expect.arrayContaining(Object.values(ENTRIES).map((entry) => `${entry}.ts`)));
    const built = sources.flatMap((source) => {
      const base = source.replace(/\.ts$/, '');
      return ['dist', 'dist/cjs'].flatMap((out) => [
        `${out}/${base}.js`,
        `${out}/${base}.js.map`,
        `${out}/${base}.d.ts`,
      ]);
    });
    expect(files.filter((file) => file.startsWith('dist/') && file !== 'dist/cjs/package.json').sort()).toStrictEqual(
      built.sort(),
    );
    expect(
      JSON.parse(readFileSync(path.join(unpacked, 'node_modules/mcp-subscriptions/dist/cjs/package.json'), 'utf8')),
    ).toStrictEqual({ type: 'commonjs' });
  });

  it('have declarations that import each other by their .js names, as TypeScript before 5 requires', () => {
    const root = path.join(unpacked, 'node_modules', 'mcp-subscriptions');
    const declarations = files.filter((file) => file.endsWith('.d.ts'));
    const specifiers = declarations.flatMap((file) =>
      [
        ...readFileSync(path.join(root, file), 'utf8').matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)['"](\.[^'"]*)['"]/g),
      ].map((match) => `${file}: ${match[1]}`),
    );
    expect(specifiers.length).toBeGreaterThan(declarations.length); // the pattern does find their imports
    expect(specifiers.filter((specifier) => !specifier.endsWith('.js'))).toStrictEqual([]);
  });

  it('have source maps whose sources are all in the tarball', () => {
    const root = path.join(unpacked, 'node_modules', 'mcp-subscriptions');
    const maps = files.filter((file) => file.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(0);
    const unresolved: string[] = [];
    for (const map of maps) {
      const { sources, sourceRoot = '' } = JSON.parse(readFileSync(path.join(root, map), 'utf8')) as {
        sources: string[];
        sourceRoot?: string;
      };
      expect(sources.length).toBeGreaterThan(0);
      for (const source of sources) {
        const resolved = path.relative(root, path.resolve(root, path.dirname(map), sourceRoot, source));
        if (!files.includes(resolved.split(path.sep).join('/'))) unresolved.push(`${map} → ${source}`);
      }
      const js = readFileSync(path.join(root, map.replace(/\.map$/, '')), 'utf8');
      expect(js).toContain(`//# sourceMappingURL=${path.basename(map)}`);
    }
    expect(unresolved).toStrictEqual([]);
  });
});

/** The TypeScripts the consumers are compiled with: the repository's, and what `npm i typescript` installs today. */
const COMPILERS = {
  5: { tsc: path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), version: /^Version 5\.\d+\.\d+$/ },
  7: { tsc: path.join(REPO_ROOT, 'node_modules', 'typescript7', 'bin', 'tsc'), version: /^Version 7\.\d+\.\d+$/ },
} as const;
type TypeScript = keyof typeof COMPILERS;
const TYPESCRIPTS: readonly TypeScript[] = [5, 7];

interface Consumer {
  /** Folder under test/consumers/. */
  readonly name: string;
  /** How node runs the compiled consumer, and so which build it must load. */
  readonly format: 'commonjs' | 'module';
  /** The file of test/consumers/sources/ it compiles, and its name in the consumer's src/. */
  readonly source?: { readonly from: string; readonly to: string };
  /** Its tsconfig, as `tsc -p` is given it. */
  readonly project?: string;
  /** Extra flags for node. */
  readonly nodeArgs?: readonly string[];
  /**
   * The errors (all of them) with which a TypeScript refuses this tsconfig, where one does: the README
   * says which settings need which TypeScript, and this checks it rather than skipping the pair.
   */
  readonly refusedBy?: { readonly [version in TypeScript]?: readonly string[] };
}

const MATRIX: readonly Consumer[] = [
  // TypeScript 7 removed moduleResolution node10 (TypeScript 6 deprecated it).
  // The two below set esModuleInterop, as every app compiling Fastify's own types must (pino's types
  // default-import a CommonJS module), since they compile `mcp-subscriptions/fastify` too.
  { name: 'node10-cjs', format: 'commonjs', refusedBy: { 7: ['TS5108'] } },
  // `module: commonjs` with moduleResolution left out: node10 on TypeScript 5, bundler on 7.
  { name: 'commonjs-cjs', format: 'commonjs' },
  { name: 'node16-cjs', format: 'commonjs' },
  { name: 'node16-esm', format: 'module' },
  { name: 'nodenext-cjs', format: 'commonjs' },
  { name: 'nodenext-esm', format: 'module' },
  { name: 'bundler', format: 'module' },
  // Tooling that sets the common `source` condition (TypeScript here, node at run time) gets the build.
  { name: 'bundler-source-condition', format: 'module', nodeArgs: ['--conditions=source'] },
];

const NEST_SOURCE = { from: 'nest.ts', to: 'main.ts' } as const;

/** Apps as Nest 11's `nest new` makes them, built as `nest build` builds them: from tsconfig.build.json. */
const NEST_NEW: readonly Consumer[] = [
  // Its tsconfig as generated: TypeScript 7 refuses `baseUrl`, and wants the rootDir that 5 infers.
  {
    name: 'nest-new',
    format: 'commonjs',
    source: NEST_SOURCE,
    project: 'tsconfig.build.json',
    refusedBy: { 7: ['TS5011', 'TS5102'] },
  },
  // The same, changed as the README says for TypeScript 7 (no baseUrl, types, rootDir): both build it.
  { name: 'nest-new-ts7', format: 'commonjs', source: NEST_SOURCE, project: 'tsconfig.build.json' },
];

interface Compiled {
  /** tsc's exit status. */
  readonly status: number;
  /** What it printed: the files it loaded (`--listFiles`) and its errors. */
  readonly output: string;
}

/** Runs one TypeScript's tsc in `cwd`; resolves (never rejects) with its status and output. */
function runTsc(version: TypeScript, args: readonly string[], cwd: string): Promise<Compiled> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [COMPILERS[version].tsc, ...args],
      { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error === null) resolve({ status: 0, output: `${stdout}${stderr}` });
        // A number is tsc's exit status; anything else means tsc did not run, and says why.
        else if (typeof error.code === 'number') resolve({ status: error.code, output: `${stdout}${stderr}` });
        else resolve({ status: 1, output: `${stdout}${stderr}${error.message}` });
      },
    );
  });
}

/** Each TypeScript's output goes to its own folder, so that both compile a consumer at once. */
const outDir = (version: TypeScript): string => path.join('dist', `ts${version}`);

const compiles = new Map<string, ReadonlyMap<TypeScript, Promise<Compiled>>>();

/**
 * The consumer's compile by `version`. The first call installs the tarball in the consumer, writes its
 * source into its src/ (so that it resolves the package from its own node_modules and takes its module
 * format from its own package.json, as an app's source does), and starts both TypeScripts on it: the
 * next test finds its compile done or under way.
 */
function compile(consumer: Consumer, version: TypeScript): Promise<Compiled> {
  let started = compiles.get(consumer.name);
  if (started === undefined) {
    const dir = path.join(CONSUMERS, consumer.name);
    const source = consumer.source ?? { from: `${consumer.format}.ts`, to: 'index.ts' };
    installPacked(packed!.tarball, dir);
    rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
    mkdirSync(path.join(dir, 'src'), { recursive: true });
    copyFileSync(path.join(CONSUMERS, 'sources', source.from), path.join(dir, 'src', source.to));
    const args = (v: TypeScript) => ['-p', consumer.project ?? 'tsconfig.json', '--outDir', outDir(v), '--listFiles'];
    started = new Map(TYPESCRIPTS.map((v) => [v, runTsc(v, args(v), dir)]));
    compiles.set(consumer.name, started);
  }
  return started.get(version)!;
}

/** The error codes in tsc's output, each once, in order. */
const errorCodes = (output: string): string[] => [
  ...new Set([...output.matchAll(/error (TS\d+):/g)].map((m) => m[1]!)),
];

/** Compiles the consumer with `version`, which must accept it; the package's files it loaded. */
async function compiledFiles(consumer: Consumer, version: TypeScript): Promise<string[]> {
  const { status, output } = await compile(consumer, version);
  if (status !== 0) {
    throw new Error(`TypeScript ${version}: tsc -p test/consumers/${consumer.name} failed:\n${output}`);
  }
  const installed = path.join(CONSUMERS, consumer.name, 'node_modules', 'mcp-subscriptions');
  return output
    .split('\n')
    .filter((file) => file.startsWith(installed + path.sep))
    .map((file) => path.relative(installed, file).split(path.sep).join('/'));
}

/** Declarations the compiler loaded that are not `build`'s: the sources, or the other build. */
const outside = (files: readonly string[], build: string): string[] =>
  files.filter(
    (file) =>
      !file.startsWith(`${build}/`) || !file.endsWith('.d.ts') || (build === 'dist' && file.startsWith('dist/cjs/')),
  );

/** Runs the consumer's compiled entry with node; its one line of JSON. */
function runCompiled(consumer: Consumer, version: TypeScript, entry: string): unknown {
  const output = execFileSync(process.execPath, [...(consumer.nodeArgs ?? []), path.join(outDir(version), entry)], {
    cwd: path.join(CONSUMERS, consumer.name),
    encoding: 'utf8',
  });
  return JSON.parse(output);
}

/** Every consumer with every TypeScript, TypeScript 5 first (its test starts both compiles). */
const pairs = (consumers: readonly Consumer[]) =>
  consumers.flatMap((consumer) => TYPESCRIPTS.map((typescript) => ({ ...consumer, consumer, typescript })));
/** The pairs in which the TypeScript accepts the consumer's tsconfig. */
const accepted = (consumers: readonly Consumer[]) =>
  pairs(consumers).filter(({ refusedBy, typescript }) => refusedBy?.[typescript] === undefined);

interface ConsumerReport {
  format: string;
  resolved: Record<string, string>;
  values: {
    SubscriptionHub: string;
    openStreams: number;
    mcpSubscriptions: string;
    McpSubscriptionsModule: boolean;
    RedisBus: string;
    redisStats: string;
    PostgresBus: string;
    postgresStats: string;
    listen: string;
    listenErrorCode: string;
  };
}

describe('the TypeScripts the consumers are compiled with', () => {
  it('are TypeScript 5 (the repository’s) and TypeScript 7 (what `npm i typescript` installs)', () => {
    for (const version of TYPESCRIPTS) {
      const printed = execFileSync(process.execPath, [COMPILERS[version].tsc, '--version'], { encoding: 'utf8' });
      expect(printed.trim()).toMatch(COMPILERS[version].version);
    }
  });
});

describe('consumers compiled against the tarball with their own tsconfig, then run', () => {
  it.each(accepted(MATRIX))(
    '$name on TypeScript $typescript: tsc loads only the $format build’s declarations, and node loads its JavaScript',
    async ({ consumer, typescript }) => {
      const { name, format } = consumer;
      const installed = path.join(CONSUMERS, name, 'node_modules', 'mcp-subscriptions');
      const build = format === 'commonjs' ? 'dist/cjs' : 'dist';
      const ours = await compiledFiles(consumer, typescript);
      expect(ours).toEqual(expect.arrayContaining(Object.values(ENTRIES).map((entry) => `${build}/${entry}.d.ts`)));
      expect(outside(ours, build)).toStrictEqual([]);

      const report = runCompiled(consumer, typescript, 'index.js') as ConsumerReport;
      expect(report.format).toBe(format);
      const expected = Object.fromEntries(
        Object.entries(ENTRIES).map(([subpath, entry]) => {
          const file = path.join(installed, build, `${entry}.js`);
          return [subpath, format === 'commonjs' ? file : pathToFileURL(file).href];
        }),
      );
      expect(report.resolved).toStrictEqual(expected);
      expect(report.values).toStrictEqual({
        SubscriptionHub: 'function',
        openStreams: 0,
        mcpSubscriptions: 'function',
        fastifyPlugin: true,
        McpSubscriptionsModule: true,
        RedisBus: 'function',
        redisStats: 'connected',
        PostgresBus: 'function',
        postgresStats: 'connected',
        listen: 'function',
        listenErrorCode: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_REFUSED',
      });
    },
    CONSUMER_TIMEOUT_MS,
  );
});

describe('a `nest new` app (Nest 11), built from its tsconfig.build.json as nest build builds it, then started', () => {
  it.each(accepted(NEST_NEW))(
    '$name on TypeScript $typescript: loads the CommonJS build’s declarations, and Nest injects the hub by the metadata it emits',
    async ({ consumer, typescript }) => {
      const ours = await compiledFiles(consumer, typescript);
      expect(ours).toContain('dist/cjs/adapters/nest/index.d.ts');
      expect(outside(ours, 'dist/cjs')).toStrictEqual([]);
      const installed = path.join(CONSUMERS, consumer.name, 'node_modules', 'mcp-subscriptions');
      expect(runCompiled(consumer, typescript, 'main.js')).toStrictEqual({
        resolved: path.join(installed, 'dist/cjs/adapters/nest/index.js'),
        injected: true,
      });
    },
    CONSUMER_TIMEOUT_MS,
  );
});

describe('tsconfigs that TypeScript 7 no longer accepts, refused as the README says', () => {
  const refused = pairs([...MATRIX, ...NEST_NEW]).flatMap((pair) => {
    const errors = pair.refusedBy?.[pair.typescript];
    return errors === undefined ? [] : [{ ...pair, errors }];
  });

  it.each(refused)(
    '$name on TypeScript $typescript: refused with exactly $errors',
    async ({ consumer, typescript, errors }) => {
      const { status, output } = await compile(consumer, typescript);
      expect({ failed: status !== 0, errors: errorCodes(output) }).toStrictEqual({ failed: true, errors });
    },
    CONSUMER_TIMEOUT_MS,
  );
});
