import type { AddressInfo } from 'node:net';
import { buildApp } from './app.ts';

const app = await buildApp();
const host = process.env.HOST ?? '127.0.0.1';
await app.listen({ port: Number(process.env.PORT ?? 3000), host });
console.log(`listening on http://${host}:${(app.server.address() as AddressInfo).port}/mcp`);

// On SIGTERM or SIGINT: app.close() ends every listen stream with its terminal result (resultType
// "complete"), closes the server and then the hub, and the process exits 0.
let stopping = false;
function shutdown(): void {
  if (stopping) return;
  stopping = true;
  app.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error('shutdown failed:', error);
      process.exit(1);
    },
  );
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
