/**
 * What both samples' `main.ts` do alike: read the environment or stop with a message naming the
 * variable, print the one `listening on` line, and bound the shutdown.
 */
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ConfigError, loadConfig, type SampleConfig } from './config.ts';

/** The contract allows 5 s from the signal to exit; this leaves a margin for the process to end. */
const SHUTDOWN_DEADLINE_MS = 4000;
/** How often idle sockets (keep-alive, or never used) are swept while the server drains. */
const IDLE_SWEEP_MS = 50;

/** Prints `message` on stderr and exits 1. */
export function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

/**
 * The configuration from `process.env` (`load` it, by default the samples' shared {@link loadConfig}),
 * or exit 1 with a line naming the bad variable.
 */
export function readConfigOrExit(): SampleConfig;
export function readConfigOrExit<T>(load: (env: NodeJS.ProcessEnv) => T): T;
export function readConfigOrExit(load: (env: NodeJS.ProcessEnv) => unknown = loadConfig): unknown {
  try {
    return load(process.env);
  } catch (error) {
    if (error instanceof ConfigError) fail(`Invalid configuration: ${error.message}`);
    throw error;
  }
}

/** The MCP endpoint's URL for the address the server listens on. */
export function mcpUrlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}/mcp`;
}

/**
 * On SIGTERM or SIGINT: `closeApp()` (which must end every listen stream with its terminal result and
 * close `server`), then exit 0. Whatever a client does (holds a socket, stops reading), the process is
 * gone before the contract's 5 s: a client that stops reading is cut off by the hub's own bound, and
 * the shutdown still counts as done; a shutdown that fails, or is still not done at the deadline (a
 * request that never completes keeps the server from closing), exits 1, so that a supervisor is not
 * told all went well.
 */
export function exitGracefullyOnSignals(server: Server, closeApp: () => Promise<void>): void {
  const sockets = trackSockets(server);
  let shuttingDown = false;
  const shutdown = async (signal: NodeJS.Signals): Promise<void> => {
    if (shuttingDown) return;
    shuttingDown = true;
    console.error(`[sample-app] ${signal}: ending listen streams and closing`);
    setTimeout(() => {
      console.error(
        `[sample-app] shutdown did not finish within ${SHUTDOWN_DEADLINE_MS} ms; closing the ${sockets.size} remaining connection(s)`,
      );
      server.closeAllConnections();
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS).unref();
    // Streams that just ended, and requests answered while closing, leave keep-alive sockets behind.
    // Node counts a connection that has not sent a byte as waiting for its first request, not idle:
    // Node's own fetch leaves one behind whenever it aborts a streaming response (nodejs/undici#5845),
    // and it would hold the server open. Nothing was asked on it, so nothing is left to answer.
    const sweep = setInterval(() => {
      server.closeIdleConnections();
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
    }, IDLE_SWEEP_MS);
    let exitCode = 0;
    try {
      await closeApp();
    } catch (error) {
      console.error('[sample-app] shutdown failed:', error);
      exitCode = 1;
    }
    clearInterval(sweep);
    process.exit(exitCode);
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      void shutdown(signal);
    });
  }
}

/** The server's open sockets, kept up to date. */
function trackSockets(server: Server): ReadonlySet<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return sockets;
}
