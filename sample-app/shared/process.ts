/**
 * What both samples' `main.ts` do alike: read the environment or stop with a message naming the
 * variable, print the one `listening on` line, and bound the shutdown.
 */
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Hub } from 'mcp-subscriptions';
import { ConfigError, loadConfig, type SampleConfig } from './config.ts';

/**
 * The contract allows 5 s from the signal to exit, plus `DRAIN_MS`; this leaves a margin for the
 * process to end.
 */
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

/** What the shutdown drains before it closes the app: the hub, over `DRAIN_MS`. */
export interface ShutdownDrain {
  /** The app's hub: `hub.drain({ overMs: drainMs })` runs first. */
  readonly hub: Pick<Hub, 'drain'>;
  /** `DRAIN_MS` (`config.drainMs`): over how long the open listen streams are ended; `0` at once. */
  readonly drainMs: number;
}

/**
 * On SIGTERM or SIGINT: drain the hub over `DRAIN_MS` (new listens refused with 503 and `Retry-After`
 * meanwhile, while the server still answers everything else), then `closeApp()` (which must end every
 * listen stream left with its terminal result and close `server`), then exit 0. Every sample's main
 * calls this: the drain-then-close sequence is written once. Whatever a client does (holds a socket,
 * stops reading), the process is gone before the contract's 5 s plus `DRAIN_MS`: a client that stops
 * reading is cut off by the hub's own bound, and the shutdown still counts as done; a shutdown that
 * fails, or is still not done at the deadline (a request that never completes keeps the server from
 * closing), exits 1, so that a supervisor is not told all went well.
 */
export function exitGracefullyOnSignals(
  server: Server,
  closeApp: () => Promise<void>,
  { hub, drainMs }: ShutdownDrain,
): void {
  const sockets = trackSockets(server);
  let shuttingDown = false;
  const shutdown = async (signal: NodeJS.Signals): Promise<void> => {
    if (shuttingDown) return;
    shuttingDown = true;
    console.error(
      drainMs > 0
        ? `[sample-app] ${signal}: ending listen streams over ${drainMs} ms, then closing`
        : `[sample-app] ${signal}: ending listen streams and closing`,
    );
    const deadlineMs = drainMs + SHUTDOWN_DEADLINE_MS;
    setTimeout(() => {
      console.error(
        `[sample-app] shutdown did not finish within ${deadlineMs} ms; closing the ${sockets.size} remaining connection(s)`,
      );
      server.closeAllConnections();
      process.exit(1);
    }, deadlineMs).unref();
    let sweep: NodeJS.Timeout | undefined;
    let exitCode = 0;
    try {
      // The server still serves during the drain: a listen gets its 503 and Retry-After (not a reset),
      // and the rest of MCP and the REST API answer as usual.
      await hub.drain({ overMs: drainMs });
      // Only now: the sweep would reset a connection opened during the drain before its request came.
      // Streams that just ended, and requests answered while closing, leave keep-alive sockets behind.
      // Node counts a connection that has not sent a byte as waiting for its first request, not idle:
      // Node's own fetch leaves one behind whenever it aborts a streaming response (nodejs/undici#5845),
      // and it would hold the server open. Nothing was asked on it, so nothing is left to answer.
      sweep = setInterval(() => {
        server.closeIdleConnections();
        for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
      }, IDLE_SWEEP_MS);
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
