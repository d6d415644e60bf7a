/**
 * The package as published (issue #9): the tarball `npm pack` makes (which runs the build), its
 * manifest and its files, and consumer projects compiled against it in every module mode users run.
 *
 * Each consumer in test/consumers/<name> is a project of its own (package.json, tsconfig.json, one
 * source file that takes a value and a type from each entry). The tarball is unpacked into its own
 * node_modules; express, Nest and @types/node come from the repository's node_modules through Node's
 * and TypeScript's upward lookup. It is compiled with the repository's TypeScript, which must load
 * only the build's declarations, then run with node, and it prints where each entry resolved.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { installPacked, packPackage, PACK_TIMEOUT_MS, type Packed } from '../helpers/pack.ts';
import { REPO_ROOT } from '../helpers/sample-app.ts';

const CONSUMERS = path.join(REPO_ROOT, 'test', 'consumers');
const TSC = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** A consumer's tsc (with full lib checking) and its run: tens of seconds on a busy machine. */
const CONSUMER_TIMEOUT_MS = 180_000;

const ENTRIES = {
  '.': 'lib/index',
  './express': 'adapters/express/index',
  './nest': 'adapters/nest/index',
  './redis': 'adapters/redis/index',
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

const relative = (target: string) => target.replace(/^\.\//, '');

describe('the published manifest', () => {
  it('names no condition that leads to sources except our own, which no other tooling sets', () => {
    const leaves = Object.entries(manifest.exports).flatMap(([subpath, value]) =>
      exportTargets(value).map((leaf) => ({ subpath, ...leaf })),
    );
    const toSources = leaves.filter(({ target }) => target.endsWith('.ts') && !target.endsWith('.d.ts'));
    expect(toSources.map(({ subpath, conditions, target }) => [subpath, conditions, target])).toStrictEqual([
      ['.', ['mcp-subscriptions-source'], './lib/index.ts'],
      ['./express', ['mcp-subscriptions-source'], './adapters/express/index.ts'],
      ['./nest', ['mcp-subscriptions-source'], './adapters/nest/index.ts'],
      ['./redis', ['mcp-subscriptions-source'], './adapters/redis/index.ts'],
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
        nest: ['./dist/cjs/adapters/nest/index.d.ts'],
        redis: ['./dist/cjs/adapters/redis/index.d.ts'],
        client: ['./dist/cjs/adapters/client/index.d.ts'],
      },
    });
  });

  it('names only files that are in the tarball', () => {
    const named = [
      manifest.main!,
      manifest.types!,
      ...Object.values(manifest.typesVersions!['*']!).flat(),
      ...Object.values(manifest.exports).flatMap((value) => exportTargets(value).map(({ target }) => target)),
    ].map(relative);
    expect(named.filter((file) => !files.includes(file))).toStrictEqual([]);
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
        !/^dist\/(cjs\/)?(lib|adapters\/(express|nest|redis|client))\/[a-z-.]+\.(js|js\.map|d\.ts)$/.test(file) &&
        !/^(lib|adapters\/(express|nest|redis|client))\/[a-z-.]+\.ts$/.test(file) &&
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

interface Consumer {
  /** Folder under test/consumers/. */
  readonly name: string;
  /** How node runs the compiled consumer, and so which build it must load. */
  readonly format: 'commonjs' | 'module';
  /** Extra flags for node. */
  readonly nodeArgs?: readonly string[];
}

const MATRIX: readonly Consumer[] = [
  { name: 'node10-cjs', format: 'commonjs' },
  { name: 'node16-cjs', format: 'commonjs' },
  { name: 'node16-esm', format: 'module' },
  { name: 'nodenext-cjs', format: 'commonjs' },
  { name: 'nodenext-esm', format: 'module' },
  { name: 'bundler', format: 'module' },
  // Tooling that sets the common `source` condition (TypeScript here, node at run time) gets the build.
  { name: 'bundler-source-condition', format: 'module', nodeArgs: ['--conditions=source'] },
];

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
    listen: string;
    listenErrorCode: string;
  };
}

describe('consumers compiled against the tarball with their own tsconfig, then run', () => {
  it.each(MATRIX)(
    '$name: tsc loads only the $format build’s declarations, and node loads its JavaScript',
    ({ name, format, nodeArgs = [] }) => {
      const dir = path.join(CONSUMERS, name);
      const installed = path.join(dir, 'node_modules', 'mcp-subscriptions');
      const build = format === 'commonjs' ? 'dist/cjs' : 'dist';
      installPacked(packed!.tarball, dir);
      rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
      // Every consumer of one format compiles the same source, written into its own src/ so that it
      // resolves the package from its own node_modules and takes its module format from its own
      // package.json, as an app's source does.
      mkdirSync(path.join(dir, 'src'), { recursive: true });
      copyFileSync(path.join(CONSUMERS, 'sources', `${format}.ts`), path.join(dir, 'src', 'index.ts'));

      let listed: string;
      try {
        listed = execFileSync(process.execPath, [TSC, '-p', dir, '--listFiles'], { encoding: 'utf8' });
      } catch (error) {
        throw new Error(`tsc -p test/consumers/${name} failed:\n${(error as { stdout?: string }).stdout ?? ''}`);
      }
      const ours = listed
        .split('\n')
        .filter((file) => file.startsWith(installed + path.sep))
        .map((file) => path.relative(installed, file).split(path.sep).join('/'));
      expect(ours).toEqual(expect.arrayContaining(Object.values(ENTRIES).map((entry) => `${build}/${entry}.d.ts`)));
      // Declarations of this build only: never the sources, never the other build.
      const elsewhere = ours.filter(
        (file) =>
          !file.startsWith(`${build}/`) ||
          !file.endsWith('.d.ts') ||
          (build === 'dist' && file.startsWith('dist/cjs/')),
      );
      expect(elsewhere).toStrictEqual([]);

      const output = execFileSync(process.execPath, [...nodeArgs, path.join('dist', 'index.js')], {
        cwd: dir,
        encoding: 'utf8',
      });
      const report = JSON.parse(output) as ConsumerReport;
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
        McpSubscriptionsModule: true,
        RedisBus: 'function',
        redisStats: 'connected',
        listen: 'function',
        listenErrorCode: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_REFUSED',
      });
    },
    CONSUMER_TIMEOUT_MS,
  );
});
