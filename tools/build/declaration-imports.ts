/**
 * The last step of `npm run build`: the sources import each other by their `.ts` names, which
 * `rewriteRelativeImportExtensions` turns into `.js` in the emitted JavaScript but which tsc keeps,
 * as written, in the declarations it emits. TypeScript 5 reads those; 4.7 to 4.9 refuse them (TS2691)
 * and, with `skipLibCheck`, silently type the whole package as `any`. This rewrites every relative
 * `.ts` specifier in the .d.ts files under the given folders to the `.js` file beside it, so the
 * declarations name exactly what the JavaScript imports. Silent on success: `npm pack --json` runs
 * the build and prints its JSON on the same stdout.
 *
 * Usage: node --import tsx tools/build/declaration-imports.ts dist
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

// `from './x.ts'`, `import './x.ts'`, `import('./x.ts')`: relative specifiers only, never a `.d.ts` one.
const RELATIVE_TS = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.\.?\/[^'"\n]*?)(?<!\.d)\.ts\2/g;

const folders = process.argv.slice(2);
if (folders.length === 0) {
  console.error('usage: declaration-imports.ts <folder>...');
  process.exit(2);
}
for (const folder of folders) {
  for (const name of readdirSync(folder, { recursive: true, encoding: 'utf8' })) {
    if (!name.endsWith('.d.ts')) continue;
    const file = path.join(folder, name);
    const text = readFileSync(file, 'utf8');
    const fixed = text.replace(
      RELATIVE_TS,
      (_, lead: string, quote: string, base: string) => `${lead}${quote}${base}.js${quote}`,
    );
    if (fixed !== text) writeFileSync(file, fixed);
  }
}
