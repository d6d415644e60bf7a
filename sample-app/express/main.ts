/**
 * Starts the Express sample (`npm start`): reads the environment, listens on HOST:PORT, prints
 * `listening on http://HOST:PORT/mcp` once it accepts connections, and shuts down gracefully on
 * SIGTERM or SIGINT.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exitGracefullyOnSignals, fail, mcpUrlOf, readConfigOrExit } from '../shared/process.ts';
import { createApp } from './app.ts';

const config = readConfigOrExit();
const { app, ready, close } = createApp(config);
const server = createServer(app);
// With REDIS_URL or REDIS_CLUSTER, announce "listening" only once this instance receives what the others publish.
await ready();

server.once('error', (error: NodeJS.ErrnoException) => {
  fail(`Cannot listen on ${config.host}:${config.port}: ${error.code ?? error.message}`);
});
server.listen(config.port, config.host, () => {
  // The host in parentheses: the contract's way for a test or a script to know which sample it started.
  console.log(`listening on ${mcpUrlOf(server.address() as AddressInfo)} (express)`);
});

exitGracefullyOnSignals(server, async () => {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // Every open listen stream gets its terminal result (resultType "complete"), then ends.
  await close();
  await closed;
});
