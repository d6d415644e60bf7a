/**
 * The last step of `prepack`: fails (exit 1, naming each) when a file that package.json names as an
 * entry point (`main`, `types`, `typesVersions`, any `exports` condition) is missing, so that `npm pack`
 * and `npm publish` stop rather than ship a package without its build. Silent on success: `npm pack
 * --json` prints its JSON on the same stdout.
 *
 * Usage: node --import tsx tools/build/check-entry-points.ts [package-folder]
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { missingEntryPoints, type EntryManifest } from './entry-points.ts';

const root = path.resolve(process.argv[2] ?? '.');
const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as EntryManifest;
const missing = missingEntryPoints(manifest, (file) => existsSync(path.join(root, file)));
if (missing.length > 0) {
  console.error(`package.json names ${missing.length} entry point(s) that do not exist; run \`npm run build\`:`);
  for (const { file, from } of missing) console.error(`  ${file}  (${from})`);
  process.exit(1);
}
