/**
 * What the soak's driver (`run.ts`) and its server process (`server.ts`) tell each other over Node's
 * IPC channel: the server's settings, the driver's requests, and the server's snapshots of itself.
 */
import type { HubStats } from 'mcp-subscriptions';

/** How the server process is set up; passed as JSON in `SOAK_SERVER_CONFIG`. */
export interface ServerConfig {
  /** Cycles the driver runs: the size of the per-cycle open/close tallies. */
  readonly cycles: number;
  /** Events published per second, in ticks of 10 ms. */
  readonly publishRate: number;
  /** How many hot URIs (`soak://hot/0..n-1`) the publisher updates. */
  readonly hotUris: number;
  readonly keepAliveMs: number;
  readonly stallTimeoutMs: number;
  /** The hub's graceful-end bound: a blocked stream being completed is cut off after it. */
  readonly completeTimeoutMs: number;
  readonly authorizeTimeoutMs: number;
  /** The engine-wide bound on host checks in flight; the permit probe asks for exactly this many. */
  readonly maxChecksInFlight: number;
  readonly maxBuffer: number;
}

/** A request of the driver; the server answers each with a {@link Reply} of the same `seq`. */
export type Request =
  | { readonly seq: number; readonly type: 'measure'; readonly label: string; readonly resumePublisher: boolean }
  | { readonly seq: number; readonly type: 'blocked'; readonly cycle: number }
  | { readonly seq: number; readonly type: 'complete' }
  | { readonly seq: number; readonly type: 'close' }
  | { readonly seq: number; readonly type: 'exit' };

/** The server's answer to one request. */
export type Reply =
  | { readonly seq: number; readonly type: 'measure'; readonly snapshot: Snapshot }
  | { readonly seq: number; readonly type: 'blocked'; readonly state: ResponseState }
  | { readonly seq: number; readonly type: 'complete' | 'close'; readonly ms: number }
  | { readonly seq: number; readonly type: 'exit' };

/**
 * A cycle's listen response on the server: its socket refuses more (`blocked`), it is open and
 * writing (`writing`), it was ended but its last bytes never left (`ended-unflushed`: the socket is
 * still held), or it is closed or was never seen (`gone`).
 */
export type ResponseState = 'blocked' | 'writing' | 'ended-unflushed' | 'gone';

/** Sent once, when the server listens. */
export interface Ready {
  readonly type: 'ready';
  readonly port: number;
}

/**
 * What `mcp-subscriptions:stream:open` and `:stream:close` said, per stream. Every soak stream has a
 * principal of its own (`c<cycle>`), so the tallies are per stream.
 */
export interface DiagnosticsTally {
  readonly opens: number;
  readonly closes: number;
  /** Streams that opened and closed exactly once. */
  readonly closedOnce: number;
  /** Streams closed more than once. */
  readonly closedTwice: number;
  /** Streams opened and never closed. */
  readonly neverClosed: number;
  /** Closes of streams never opened. */
  readonly closedUnopened: number;
  /** Closes by reason, as the channel reported them. */
  readonly byReason: Readonly<Record<string, number>>;
}

/** The server process, as seen from inside, at one moment. */
export interface Snapshot {
  readonly label: string;
  /** Whether the server was idle (no stream, no pending listen, no check, no connection) when measured. */
  readonly quiesced: boolean;
  /** `process.memoryUsage()` after three full GCs. */
  readonly heapUsed: number;
  readonly rss: number;
  /** The largest heap and RSS seen between two snapshots (sampled every 250 ms). */
  readonly peakHeapUsed: number;
  readonly peakRss: number;
  readonly stats: HubStats;
  /**
   * What `stats()` cannot show, read from the hub's private fields (white-box): index sizes, the
   * per-principal counts, keepalive clocks, the end-of-tick batch, the hub's event listeners, the
   * bus's members.
   */
  readonly internals: Readonly<Record<string, number>>;
  /** Live `Timeout`s (refed or not, via async_hooks), and how many of them were created since the baseline. */
  readonly timersLive: number;
  readonly timersSinceBaseline: number;
  /** `process.getActiveResourcesInfo()`, counted by type. */
  readonly activeResources: Readonly<Record<string, number>>;
  /** Listeners on `process` and on the HTTP server, by event. */
  readonly processListeners: Readonly<Record<string, number>>;
  readonly serverListeners: Readonly<Record<string, number>>;
  /** Open TCP connections of the HTTP server. */
  readonly connections: number;
  /** Host checks called and not yet settled (a check told to stop by its signal settles too). */
  readonly checksInFlight: number;
  readonly checksCalled: number;
  readonly diagnostics: DiagnosticsTally;
  /** Lines the hub and the engine logged. */
  readonly logged: { readonly warn: number; readonly error: number; readonly firstError?: string };
  /** The server's event-loop delay since the previous snapshot, in ms. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}
