/**
 * What the soak's drivers (`run.ts`, and `stuck/main.ts` for `--stuck`) and its server process (`server.ts`)
 * tell each other over Node's IPC channel: the server's settings, the driver's requests, and the
 * server's snapshots of itself.
 */
import type { HubStats } from 'mcp-subscriptions';

/** How the server process is set up; passed as JSON in `SOAK_SERVER_CONFIG`. */
export interface ServerConfig {
  /**
   * `cycles`: the soak of run.ts (its publisher runs from the start). `stuck`: the run of stuck/main.ts, whose
   * publisher runs only when the driver says so and numbers the events its healthy readers follow.
   */
  readonly mode: 'cycles' | 'stuck';
  /** Cycles the driver runs: the size of the per-cycle open/close tallies (principal `c<cycle>`). */
  readonly cycles: number;
  /**
   * Events published per second, in ticks of 10 ms. In `stuck` mode: the numbered task events of the
   * healthy readers (principal `h`), on a schedule that catches up when a tick is late.
   */
  readonly publishRate: number;
  /** `stuck` mode: tool list changes and updates of the hot URIs per second, for every other stream. */
  readonly loadRate: number;
  /** `stuck` mode: the task ids (`h:0` … `h:<n-1>`) the numbered events rotate over. */
  readonly seqKeys: number;
  /** Open streams one principal may hold, or `false` (the stuck run's healthy readers share one). */
  readonly maxSubscriptionsPerPrincipal: number | false;
  /** How many hot URIs (`soak://hot/0..n-1`) the publisher updates. */
  readonly hotUris: number;
  readonly keepAliveMs: number;
  readonly stallTimeoutMs: number;
  /** The hub's graceful-end bound: a blocked stream being completed is cut off after it. */
  readonly completeTimeoutMs: number;
  readonly authorizeTimeoutMs: number;
  /** The engine-wide bound on host checks in flight; the permit probe asks for exactly this many. */
  readonly maxChecksInFlight: number;
}

/** A request of the driver; the server answers each with a {@link Reply} of the same `seq`. */
export type Request =
  | { readonly seq: number; readonly type: 'measure'; readonly label: string; readonly resumePublisher: boolean }
  | { readonly seq: number; readonly type: 'blocked'; readonly cycle: number }
  | { readonly seq: number; readonly type: 'complete' }
  | { readonly seq: number; readonly type: 'close' }
  | { readonly seq: number; readonly type: 'exit' }
  | { readonly seq: number; readonly type: 'publisher'; readonly run: boolean; readonly resetSeq: boolean }
  | { readonly seq: number; readonly type: 'memory' }
  | { readonly seq: number; readonly type: 'sample' }
  | {
      readonly seq: number;
      readonly type: 'watched';
      /** Per-cycle detail for cycles `from` to `to` (exclusive). */
      readonly detail?: { readonly from: number; readonly to: number };
    };

/** The server's answer to one request. */
export type Reply =
  | { readonly seq: number; readonly type: 'measure'; readonly snapshot: Snapshot }
  | { readonly seq: number; readonly type: 'blocked'; readonly state: ResponseState }
  | { readonly seq: number; readonly type: 'complete' | 'close'; readonly ms: number }
  | { readonly seq: number; readonly type: 'exit' }
  | { readonly seq: number; readonly type: 'publisher'; readonly published: number; readonly loads: number }
  | {
      readonly seq: number;
      readonly type: 'memory';
      readonly memory: MemorySample;
      /** The watched responses open when the memory was taken, and how many of them were blocked. */
      readonly watchedOpen: number;
      readonly watchedBlocked: number;
    }
  | { readonly seq: number; readonly type: 'sample'; readonly sample: PhaseSample }
  | { readonly seq: number; readonly type: 'watched'; readonly watched: Watched };

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

/**
 * The server's memory at one moment (`process.memoryUsage()`), at `at` (`performance.timeOrigin +
 * performance.now()`, comparable across processes). `external` includes array buffers.
 */
export interface MemorySample {
  readonly at: number;
  readonly heapUsed: number;
  readonly rss: number;
  readonly external: number;
}

/** What the server saw since the previous `sample` request (stuck mode). */
export interface PhaseSample {
  /** Memory every 250 ms, not collected first: garbage included. */
  readonly memory: readonly MemorySample[];
  /**
   * Read from the hub's open streams every 250 ms (white-box): the most events one stream held in its
   * queue, among the stopped readers' and churners' streams and among the healthy readers' (principal
   * `h`), and how far any stream went past its own bound (the keys it follows: one queued entry
   * per key); at most 0 when none did.
   */
  readonly maxQueued: number;
  readonly maxQueuedHealthy: number;
  readonly maxOverBound: number;
  /** The most events queued over every stream at once, and the most streams open at once. */
  readonly maxTotalQueued: number;
  readonly maxOpen: number;
  /** The server's event-loop delay over the period. */
  readonly loopDelayP50Ms: number;
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  readonly stats: HubStats;
}

/**
 * The watched streams (listen requests sent with `x-soak-watch`: the stopped readers), by cycle. The
 * server polls each one's socket every {@link WATCH_POLL_MS} ms for one that refuses more; the
 * close time and reason come from the stream-close diagnostics channel. Times as in
 * {@link MemorySample}; 0 where it did not happen.
 */
export interface Watched {
  /** Watched responses still open, and how many of them were blocked at the last poll. */
  readonly open: number;
  readonly blockedNow: number;
  /** Watched cycles seen blocked at least once, and closed (any reason). */
  readonly everBlocked: number;
  readonly closed: number;
  /** With `detail`: per cycle of its range, the first block seen, the start of the last block seen, the close. */
  readonly firstBlockedAt?: readonly number[];
  readonly lastBlockedAt?: readonly number[];
  readonly closedAt?: readonly number[];
  /** The close reason per cycle, `''` where none. */
  readonly reasons?: readonly string[];
}

/** How often the server looks at the watched responses. */
export const WATCH_POLL_MS = 50;
