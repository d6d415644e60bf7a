/**
 * tools/build/entry-points.ts: which files a package.json names as entry points. `prepack` refuses to
 * pack when one is missing, and test/system/package.test.ts looks for each in the packed tarball, so
 * a path it failed to find would go unchecked in both.
 */
import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { entryPoints, missingEntryPoints, type EntryManifest } from '../../tools/build/entry-points.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('entryPoints', () => {
  test('finds main, types, every typesVersions path and every exports leaf, nested conditions and fallbacks included', () => {
    const manifest: EntryManifest = {
      main: './dist/cjs/index.js',
      types: './dist/cjs/index.d.ts',
      typesVersions: { '*': { client: ['./dist/cjs/client.d.ts', './dist/cjs/client/index.d.ts'] } },
      exports: {
        '.': {
          require: { types: './dist/cjs/index.d.ts', default: './dist/cjs/index.js' },
          default: './dist/index.js',
        },
        './client': ['./dist/client.js', { default: './dist/client/index.js' }],
        './private': null,
        './package.json': './package.json',
      },
    };
    expect(entryPoints(manifest)).toStrictEqual([
      { file: 'dist/cjs/index.js', from: 'main' },
      { file: 'dist/cjs/index.d.ts', from: 'types' },
      { file: 'dist/cjs/client.d.ts', from: 'typesVersions["*"]["client"]' },
      { file: 'dist/cjs/client/index.d.ts', from: 'typesVersions["*"]["client"]' },
      { file: 'dist/cjs/index.d.ts', from: 'exports["."]["require"]["types"]' },
      { file: 'dist/cjs/index.js', from: 'exports["."]["require"]["default"]' },
      { file: 'dist/index.js', from: 'exports["."]["default"]' },
      { file: 'dist/client.js', from: 'exports["./client"][0]' },
      { file: 'dist/client/index.js', from: 'exports["./client"][1]["default"]' },
      { file: 'package.json', from: 'exports["./package.json"]' },
    ]);
    expect(entryPoints({ exports: './dist/index.js' })).toStrictEqual([{ file: 'dist/index.js', from: 'exports' }]);
  });

  test("finds every one of this package's: main, types, 6 typesVersions, 7 entries × 5 conditions and ./package.json", () => {
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as EntryManifest;
    const found = entryPoints(manifest);
    expect(found).toHaveLength(2 + 6 + 7 * 5 + 1);
    expect(found.filter(({ file }) => file.startsWith('dist/'))).toHaveLength(2 + 6 + 7 * 4);
  });
});

describe('missingEntryPoints', () => {
  test('names each missing file with where package.json names it, and nothing when all are there', () => {
    const manifest: EntryManifest = {
      main: './dist/cjs/index.js',
      exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    };
    expect(missingEntryPoints(manifest, (file) => file !== 'dist/index.d.ts')).toStrictEqual([
      { file: 'dist/index.d.ts', from: 'exports["."]["types"]' },
    ]);
    expect(missingEntryPoints(manifest, () => true)).toStrictEqual([]);
  });
});
