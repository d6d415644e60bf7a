import type { AddressInfo } from 'node:net';
import { createApp } from './app.ts';

const { app, close } = createApp();
const host = process.env.HOST ?? '127.0.0.1';
const server = app.listen(Number(process.env.PORT ?? 3000), host, () => {
  console.log(`listening on http://${host}:${(server.address() as AddressInfo).port}/mcp`);
});

// On SIGTERM or SIGINT: stop accepting connections, end every listen stream with its terminal result
// (resultType "complete"), close each connection as it falls idle, and exit once the server is closed.
let stopping = false;
function shutdown(): void {
  if (stopping) return;
  stopping = true;
  server.close(() => process.exit(0));
  setInterval(() => server.closeIdleConnections(), 100).unref();
  close().catch((error: unknown) => {
    console.error('shutdown failed:', error);
    process.exit(1);
  });
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
