/**
 * A real garbage collection for leak tests. `global.gc` exists only under `--expose-gc`, which
 * `npm run test:unit` does not pass; V8 can still turn the flag on at run time and hand out `gc` in a
 * fresh context. Returns `undefined` when neither works (the test then skips, saying why).
 */
import v8 from 'node:v8';
import vm from 'node:vm';

export function exposeGc(): (() => void) | undefined {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (typeof existing === 'function') return existing;
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc: unknown = vm.runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : undefined;
  } catch {
    return undefined;
  }
}
