/**
 * Starts the app: `npx tsx src/main.ts`, or `npm run build && node dist/main.js`. Listens on PORT
 * (default 3000; 0 picks a free port) at HOST (default 127.0.0.1).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.ts';

const { app, close } = createApp();
const server = createServer(app);

server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1', () => {
  const { address, port } = server.address() as AddressInfo;
  console.log(`listening on http://${address.includes(':') ? `[${address}]` : address}:${port}/mcp`);
});

// Graceful shutdown: stop accepting connections, end every listen stream with its terminal result
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
