/**
 * A Nest app with `enableShutdownHooks()`, run as a child process by the shutdown test: it prints
 * `listening on <url>` and lets Nest handle SIGTERM (Nest closes the app, then re-raises the signal).
 */
import { startNestApp } from './nest-apps.ts';

const app = await startNestApp({ configure: (nest) => nest.enableShutdownHooks() });
console.log(`listening on ${app.url}`);
