/**
 * The soak's server process: an Express app with `mcpSubscriptions()` on `POST /mcp`, a hub under a
 * steady publish load, and host checks that answer at once, later, never (until told to stop) or
 * with a throw. It is driven by `run.ts` (or `stuck/main.ts`, in `stuck` mode) over the IPC channel
 * (messages.ts) and reports on itself: hub statistics, the hub's private indexes, live timers, active
 * handles, listeners, connections, host checks in flight, the diagnostics channels' per-stream tallies
 * and the heap after GC. In `stuck` mode it also numbers the events of the healthy readers, watches the
 * stopped readers' sockets fill and their streams close, and samples memory and queues over time.
 *
 * A process of its own, so that what it measures (heap, timers, handles) is the server's alone and
 * its event loop is not shared with 20,000 clients. Started by run.ts with `--expose-gc`.
 */
import { createHook } from 'node:async_hooks';
import { subscribe } from 'node:diagnostics_channel';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import express, { type Request as ExpressRequest } from 'express';
import {
  type CloseReason,
  DiagnosticsChannel,
  type Logger,
  type ResourceCheck,
  type StreamCloseMessage,
  type StreamOpenMessage,
  SubscriptionHub,
} from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { now } from '../shared/clock.ts';
import {
  type DiagnosticsTally,
  type MemorySample,
  type PhaseSample,
  type Ready,
  type Reply,
  type Request,
  type ResponseState,
  type ServerConfig,
  type Snapshot,
  WATCH_POLL_MS,
  type Watched,
} from './messages.ts';

// Every Timeout, refed or not, from here on: the unref'd ones (keepalive clocks, stall and end timers)
// never show in process.getActiveResourcesInfo(). Node gives a re-armed timer a new id (init again).
const liveTimers = new Map<number, number>();
const timerStacks = new Map<number, string>();
let timerEpoch = 0;
/** `npm run soak -- --trace-timers`: where each timer left behind was created. */
const traceTimers = process.env['SOAK_TRACE_TIMERS'] === '1';
if (traceTimers) Error.stackTraceLimit = 30;
createHook({
  init(asyncId, type) {
    if (type !== 'Timeout') return;
    liveTimers.set(asyncId, timerEpoch);
    if (traceTimers) timerStacks.set(asyncId, new Error('timer created').stack ?? '');
  },
  destroy(asyncId) {
    liveTimers.delete(asyncId);
    timerStacks.delete(asyncId);
  },
}).enable();

const gc = (globalThis as { gc?: () => void }).gc;
if (typeof process.send !== 'function' || gc === undefined) {
  console.error('tools/soak/server.ts is started by tools/soak/run.ts (with an IPC channel and --expose-gc)');
  process.exit(2);
}
const send = process.send.bind(process);
const config = JSON.parse(process.env['SOAK_SERVER_CONFIG'] ?? '') as ServerConfig;
const stuckMode = config.mode === 'stuck';

// -------------------------------------------------------------------------------------------------
// What the engine logs, and what the diagnostics channels say about each stream
// -------------------------------------------------------------------------------------------------

const logged: { warn: number; error: number; firstError?: string } = { warn: 0, error: 0 };
const logger: Logger = {
  warn: () => {
    logged.warn++;
  },
  error: (message, details) => {
    logged.error++;
    if (logged.firstError === undefined) {
      const error = details?.['error'];
      logged.firstError = `${message}${error instanceof Error ? `: ${error.stack ?? error.message}` : ''}`;
      console.error(`[soak server] ${logged.firstError}`);
    }
  },
};

// Fixed-size per-cycle tallies, allocated before the baseline: a Map of 20,000 principals would be
// most of the heap growth measured.
const opens = new Uint8Array(config.cycles);
const closes = new Uint8Array(config.cycles);
/** Streams of the final phase and the probe (`f<n>`, `probe`): few, kept in a map. */
const otherOpens = new Map<string, number>();
const otherCloses = new Map<string, number>();
const closeReasons: Record<string, number> = {};
let opened = 0;
let closed = 0;

// Stuck mode: per watched cycle (a stopped reader), when its socket was first seen full, when its last
// block began, when its stream closed and why. Allocated before the baseline, like the tallies above.
const watchSize = stuckMode ? config.cycles : 0;
const firstBlockedAt = new Float64Array(watchSize);
const lastBlockedAt = new Float64Array(watchSize);
const closedAt = new Float64Array(watchSize);
const CLOSE_REASONS: readonly CloseReason[] = ['client', 'cancelled', 'complete', 'empty', 'stalled'];
/** 1 + the reason's index in CLOSE_REASONS; 0 while open. */
const closeReason = new Uint8Array(watchSize);
/** 1 for a cycle whose listen was watched: only those get a close time. */
const watchedEver = new Uint8Array(watchSize);

/** The cycle of a soak principal `c<cycle>`, or -1. */
function cycleOf(principal: string): number {
  if (principal.charCodeAt(0) !== 99 /* c */) return -1;
  const cycle = Number(principal.slice(1));
  return Number.isInteger(cycle) && cycle >= 0 && cycle < config.cycles ? cycle : -1;
}

subscribe(DiagnosticsChannel.StreamOpen, (message) => {
  const { principal } = message as StreamOpenMessage;
  opened++;
  const cycle = cycleOf(principal);
  if (cycle >= 0) opens[cycle] = Math.min(255, (opens[cycle] ?? 0) + 1);
  else otherOpens.set(principal, (otherOpens.get(principal) ?? 0) + 1);
});
subscribe(DiagnosticsChannel.StreamClose, (message) => {
  const { principal, reason } = message as StreamCloseMessage;
  closed++;
  closeReasons[reason] = (closeReasons[reason] ?? 0) + 1;
  const cycle = cycleOf(principal);
  if (cycle >= 0 && cycle < watchSize && watchedEver[cycle] === 1) {
    closedAt[cycle] = now();
    closeReason[cycle] = CLOSE_REASONS.indexOf(reason) + 1;
  }
  if (cycle >= 0) closes[cycle] = Math.min(255, (closes[cycle] ?? 0) + 1);
  else otherCloses.set(principal, (otherCloses.get(principal) ?? 0) + 1);
});

function tally(): DiagnosticsTally {
  let closedOnce = 0;
  let closedTwice = 0;
  let neverClosed = 0;
  let closedUnopened = 0;
  const count = (o: number, c: number): void => {
    if (o === 0 && c > 0) closedUnopened++;
    else if (o > 0 && c === 0) neverClosed++;
    else if (o > 0 && c === o) closedOnce += o;
    else if (c > o) closedTwice++;
  };
  for (let i = 0; i < config.cycles; i++) count(opens[i] ?? 0, closes[i] ?? 0);
  for (const principal of new Set([...otherOpens.keys(), ...otherCloses.keys()])) {
    count(otherOpens.get(principal) ?? 0, otherCloses.get(principal) ?? 0);
  }
  return {
    opens: opened,
    closes: closed,
    closedOnce,
    closedTwice,
    neverClosed,
    closedUnopened,
    byReason: { ...closeReasons },
  };
}

// -------------------------------------------------------------------------------------------------
// The host's checks: at once, later, never (until their signal aborts), a throw, and a barrier
// -------------------------------------------------------------------------------------------------

let checksCalled = 0;
let checksSettled = 0;

/** Resolves `verdict` after `ms`, or `false` as soon as the check is told to stop. */
function later(ms: number | undefined, verdict: boolean, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (value: boolean): void => {
      if (timer !== undefined) clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      checksSettled++;
      resolve(value);
    };
    const onAbort = (): void => done(false);
    if (signal.aborted) {
      done(false);
      return;
    }
    signal.addEventListener('abort', onAbort);
    if (ms !== undefined) timer = setTimeout(() => done(verdict), ms);
  });
}

/**
 * The permit probe: `maxChecksInFlight` barrier URIs whose checks answer only once all of them are
 * in flight together. One permit of the engine-wide bound leaked by an earlier listen, and the
 * barrier is never reached: each check times out and the acknowledgement comes back short.
 */
const barrier: { waiting: (() => void)[] } = { waiting: [] };

const canRead: ResourceCheck<ExpressRequest> = (uri, { signal }) => {
  checksCalled++;
  const kind = uri.slice('soak://'.length, uri.indexOf('/', 'soak://'.length));
  switch (kind) {
    case 'hot':
    case 'own':
    case 'load':
      checksSettled++;
      return true;
    case 'slow':
      return later(1 + Math.floor(Math.random() * 20), true, signal);
    case 'hang':
      return later(undefined, true, signal);
    case 'throw':
      checksSettled++;
      throw new Error('the host check failed');
    case 'barrier':
      return new Promise<boolean>((resolve) => {
        let settled = false;
        const finish = (verdict: boolean): void => {
          if (settled) return;
          settled = true;
          signal.removeEventListener('abort', onAbort);
          const at = barrier.waiting.indexOf(open);
          if (at !== -1) barrier.waiting.splice(at, 1);
          checksSettled++;
          resolve(verdict);
        };
        const open = (): void => finish(true);
        const onAbort = (): void => finish(false);
        signal.addEventListener('abort', onAbort);
        barrier.waiting.push(open);
        if (barrier.waiting.length >= config.maxChecksInFlight) {
          for (const wake of barrier.waiting.splice(0)) wake();
        }
      });
    default:
      checksSettled++;
      return false;
  }
};

// -------------------------------------------------------------------------------------------------
// The app
// -------------------------------------------------------------------------------------------------

const hub = new SubscriptionHub({
  maxSubscriptions: 100_000,
  maxSubscriptionsPerPrincipal: config.maxSubscriptionsPerPrincipal,
  stallTimeoutMs: config.stallTimeoutMs,
  completeTimeoutMs: config.completeTimeoutMs,
  logger,
});

/** The open listen responses by cycle, for the driver's "is it blocked yet?". */
const responses = new Map<number, ServerResponse>();
let latestCycle = 0;
/**
 * Stuck mode: the sockets of the open responses of requests sent with `x-soak-watch` (the stopped
 * readers), by cycle. The socket, not the response: every socket has one shape, while each Express
 * response has a hidden class of its own, and reading a getter from thousands of them every poll cost
 * the server a quarter of its time (a CPU profile of a 4,000-reader run).
 */
const watched = new Map<number, Socket>();

const app = express();
app.disable('x-powered-by');
app.post(
  '/mcp',
  (req, res, next) => {
    const cycle = Number(req.headers['x-soak-cycle']);
    if (Number.isInteger(cycle)) {
      responses.set(cycle, res);
      latestCycle = Math.max(latestCycle, cycle);
      res.once('close', () => responses.delete(cycle));
      if (cycle >= 0 && cycle < watchSize && req.headers['x-soak-watch'] === '1') {
        watched.set(cycle, req.socket);
        watchedEver[cycle] = 1;
        res.once('close', () => watched.delete(cycle));
      }
    }
    next();
  },
  mcpSubscriptions({
    hub,
    capabilities: {
      toolsListChanged: true,
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: true,
      tasks: true,
    },
    canRead,
    canAccessTask: (taskId, { principal }) => taskId.startsWith(`${principal}:`),
    principal: (req) => {
      const principal = req.headers['x-soak-principal'];
      return typeof principal === 'string' ? principal : undefined;
    },
    keepAliveMs: config.keepAliveMs,
    authorizeTimeoutMs: config.authorizeTimeoutMs,
    authorizeConcurrency: config.maxChecksInFlight,
    maxChecksInFlight: config.maxChecksInFlight,
    logger,
  }),
  // What listen passed on: a `notifications/cancelled` for a stream that is already gone.
  (_req, res) => {
    res.status(200).json({ soak: 'not a stream of this node' });
  },
);

const server = createServer(app);

// -------------------------------------------------------------------------------------------------
// The steady publish load
// -------------------------------------------------------------------------------------------------

const TICK_MS = 10;
let publisher: NodeJS.Timeout | undefined;
let ticks = 0;

function tick(): void {
  ticks++;
  let budget = Math.max(1, Math.round((config.publishRate * TICK_MS) / 1000));
  hub.toolsListChanged();
  budget--;
  if (ticks % 5 === 0) {
    hub.promptsListChanged();
    hub.resourcesListChanged();
    budget -= 2;
  }
  // A task of a recent cycle, for its owner's stream (most have closed by then: the index is the point).
  const owner = `c${Math.max(0, latestCycle - Math.floor(Math.random() * 64))}`;
  const now = new Date().toISOString();
  hub.taskStatus({ taskId: `${owner}:t`, status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs: null }, owner);
  budget--;
  for (; budget > 0; budget--) hub.resourceUpdated(`soak://hot/${Math.floor(Math.random() * config.hotUris)}`);
}

/**
 * Stuck mode: numbered task events for the healthy readers (principal `h`, task ids `h:<n mod seqKeys>`,
 * `statusMessage` "<n> <publish time>"), and load events for every other stream (a tool list change,
 * then updates of the hot URIs `soak://load/<i>`), each on a schedule from the publisher's start: a
 * late tick publishes what fell due meanwhile, so the rate holds as long as the process keeps up.
 */
const numbered = { seq: 0, loads: 0, startedAt: 0, seqAtStart: 0, loadsAtStart: 0 };

function stuckTick(): void {
  const elapsed = performance.now() - numbered.startedAt;
  // At most a fifth of a second's worth per tick: a process that fell far behind catches up over
  // several ticks rather than in one burst.
  const seqDue = Math.min(
    Math.floor((elapsed * config.publishRate) / 1000) - (numbered.seq - numbered.seqAtStart),
    Math.ceil(config.publishRate / 5),
  );
  const loadDue = Math.min(
    Math.floor((elapsed * config.loadRate) / 1000) - (numbered.loads - numbered.loadsAtStart),
    Math.ceil(config.loadRate / 5),
  );
  const iso = new Date().toISOString();
  for (let i = 0; i < seqDue; i++) {
    const n = numbered.seq++;
    hub.taskStatus(
      {
        taskId: `h:${n % config.seqKeys}`,
        status: 'working',
        statusMessage: `${n} ${now().toFixed(3)}`,
        createdAt: iso,
        lastUpdatedAt: iso,
        ttlMs: null,
      },
      'h',
    );
  }
  for (let i = 0; i < loadDue; i++) {
    const n = numbered.loads++;
    if (n % 8 === 0) hub.toolsListChanged();
    else hub.resourceUpdated(`soak://load/${n % config.hotUris}`);
  }
}

function startPublisher(): void {
  if (publisher !== undefined) return;
  if (stuckMode) {
    numbered.startedAt = performance.now();
    numbered.seqAtStart = numbered.seq;
    numbered.loadsAtStart = numbered.loads;
  }
  publisher = setInterval(stuckMode ? stuckTick : tick, TICK_MS);
}

function stopPublisher(): void {
  clearInterval(publisher);
  publisher = undefined;
}

// -------------------------------------------------------------------------------------------------
// Measuring
// -------------------------------------------------------------------------------------------------

const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
let peakHeapUsed = 0;
let peakRss = 0;
/** Stuck mode: what the `sample` request returns, gathered since the previous one. */
const phase = {
  memory: [] as MemorySample[],
  maxQueued: 0,
  maxQueuedHealthy: 0,
  maxOverBound: Number.NEGATIVE_INFINITY,
  maxTotalQueued: 0,
  maxOpen: 0,
};
const phaseDelay = monitorEventLoopDelay({ resolution: 10 });
if (stuckMode) phaseDelay.enable();
const sampler = setInterval(() => {
  const { heapUsed, rss, external } = process.memoryUsage();
  peakHeapUsed = Math.max(peakHeapUsed, heapUsed);
  peakRss = Math.max(peakRss, rss);
  if (stuckMode) {
    phase.memory.push({ at: now(), heapUsed, rss, external });
    sampleQueues();
  }
}, 250);
sampler.unref();

/** Keys a filter follows: the bound of a stream's queue (one entry per key; repeats coalesce). */
function boundOf(filter: StreamInternals['filter']): number {
  const keys =
    (filter.toolsListChanged === true ? 1 : 0) +
    (filter.promptsListChanged === true ? 1 : 0) +
    (filter.resourcesListChanged === true ? 1 : 0) +
    (filter.resourceSubscriptions?.length ?? 0) +
    (filter.taskIds?.length ?? 0);
  return keys;
}

/** Every open stream's queue against its own bound (white-box: the hub's stream set). */
function sampleQueues(): void {
  const streams = (hub as unknown as HubInternals).streams;
  let total = 0;
  for (const stream of streams) {
    const queued = stream.queued;
    total += queued;
    if (stream.principal === 'h') phase.maxQueuedHealthy = Math.max(phase.maxQueuedHealthy, queued);
    else phase.maxQueued = Math.max(phase.maxQueued, queued);
    phase.maxOverBound = Math.max(phase.maxOverBound, queued - boundOf(stream.filter));
  }
  phase.maxTotalQueued = Math.max(phase.maxTotalQueued, total);
  phase.maxOpen = Math.max(phase.maxOpen, streams.size);
}

function takeSample(): PhaseSample {
  sampleQueues();
  const sample: PhaseSample = {
    memory: phase.memory,
    maxQueued: phase.maxQueued,
    maxQueuedHealthy: phase.maxQueuedHealthy,
    maxOverBound: Number.isFinite(phase.maxOverBound) ? phase.maxOverBound : 0,
    maxTotalQueued: phase.maxTotalQueued,
    maxOpen: phase.maxOpen,
    loopDelayP50Ms: phaseDelay.percentile(50) / 1e6,
    loopDelayP99Ms: phaseDelay.percentile(99) / 1e6,
    loopDelayMaxMs: phaseDelay.max / 1e6,
    stats: hub.stats(),
  };
  Object.assign(phase, {
    memory: [],
    maxQueued: 0,
    maxQueuedHealthy: 0,
    maxOverBound: Number.NEGATIVE_INFINITY,
    maxTotalQueued: 0,
    maxOpen: 0,
  });
  phaseDelay.reset();
  return sample;
}

// Stuck mode: the watched responses, every WATCH_POLL_MS: a block begins when a poll finds the socket
// refusing more (Node's `writableNeedDrain`, what the engine's write() saw as false) after one that did
// not. A created-once interval, like the sampler: the leftover checks count timers made after the baseline.
const wasBlocked = new Uint8Array(watchSize);
let blockedNow = 0;
if (stuckMode) {
  setInterval(() => {
    const at = now();
    let blocked = 0;
    for (const [cycle, socket] of watched) {
      // The engine writes its frames to the socket: it is what refuses more.
      const full = socket.writableNeedDrain;
      if (full) {
        blocked++;
        if (wasBlocked[cycle] === 0) {
          lastBlockedAt[cycle] = at;
          if (firstBlockedAt[cycle] === 0) firstBlockedAt[cycle] = at;
        }
      }
      wasBlocked[cycle] = full ? 1 : 0;
    }
    blockedNow = blocked;
  }, WATCH_POLL_MS).unref();
}

function watchedReport(detail: { from: number; to: number } | undefined): Watched {
  let everBlocked = 0;
  let closedCount = 0;
  for (let cycle = 0; cycle < watchSize; cycle++) {
    if (firstBlockedAt[cycle] !== 0) everBlocked++;
    if (closedAt[cycle] !== 0) closedCount++;
  }
  const base = { open: watched.size, blockedNow, everBlocked, closed: closedCount };
  if (detail === undefined) return base;
  const range = <T>(pick: (cycle: number) => T): T[] =>
    Array.from({ length: Math.max(0, detail.to - detail.from) }, (_, i) => pick(detail.from + i));
  return {
    ...base,
    firstBlockedAt: range((cycle) => firstBlockedAt[cycle] ?? 0),
    lastBlockedAt: range((cycle) => lastBlockedAt[cycle] ?? 0),
    closedAt: range((cycle) => closedAt[cycle] ?? 0),
    reasons: range((cycle) => CLOSE_REASONS[(closeReason[cycle] ?? 0) - 1] ?? ''),
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function connections(): Promise<number> {
  return new Promise((resolve) => server.getConnections((error, count) => resolve(error ? -1 : count)));
}

function counted(names: readonly string[], countOf: (name: string) => number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const name of names) counts[name] = countOf(name);
  return counts;
}

/** What the soak reads of an open stream: its public `queued`, `principal` and `filter`. */
interface StreamInternals {
  readonly queued: number;
  readonly principal: string;
  readonly filter: {
    readonly toolsListChanged?: true;
    readonly promptsListChanged?: true;
    readonly resourcesListChanged?: true;
    readonly resourceSubscriptions?: readonly string[];
    readonly taskIds?: readonly string[];
  };
}

/** The hub's private fields the soak reads: what `stats()` does not show. */
interface HubInternals {
  readonly streams: Set<StreamInternals>;
  readonly byList: Record<string, Set<unknown>>;
  readonly byUri: Map<string, unknown>;
  readonly byTask: Map<string, unknown>;
  readonly byRequest: Map<string, unknown>;
  readonly perPrincipal: Map<string, number>;
  readonly listeners: Set<unknown>;
  readonly pending: number;
  readonly shared: {
    readonly flush: { readonly streams: unknown[] };
    readonly keepAlive: { readonly clocks: Map<number, unknown> };
  };
  readonly options: { readonly bus: { readonly size?: number } };
}

function internals(): Record<string, number> {
  try {
    const inner = hub as unknown as HubInternals;
    return {
      streams: inner.streams.size,
      pending: inner.pending,
      'byList.tools': inner.byList['tools_list_changed']?.size ?? -1,
      'byList.prompts': inner.byList['prompts_list_changed']?.size ?? -1,
      'byList.resources': inner.byList['resources_list_changed']?.size ?? -1,
      byUri: inner.byUri.size,
      byTask: inner.byTask.size,
      byRequest: inner.byRequest.size,
      perPrincipal: inner.perPrincipal.size,
      'keepAlive clocks': inner.shared.keepAlive.clocks.size,
      'tick batch': inner.shared.flush.streams.length,
      'hub listeners': inner.listeners.size,
      'bus members': inner.options.bus.size ?? -1,
    };
  } catch (error) {
    // The hub was rebuilt: say so rather than pass a check on fields that are not there.
    return { [`unreadable: ${String(error)}`]: -1 };
  }
}

let baselineEpoch = 0;

/** Live timers created since `epoch` began (none before the baseline is taken). */
function timersSince(epoch: number): number {
  if (epoch === 0) return 0;
  let count = 0;
  for (const created of liveTimers.values()) if (created >= epoch) count++;
  return count;
}

async function measure(label: string, resumePublisher: boolean): Promise<Snapshot> {
  stopPublisher();
  // Idle first: what clients left behind must have been noticed by the server.
  const deadline = Date.now() + 10_000;
  let quiesced = false;
  while (Date.now() < deadline) {
    const stats = hub.stats();
    if (
      stats.openStreams === 0 &&
      stats.pendingStreams === 0 &&
      checksCalled === checksSettled &&
      (await connections()) === 0
    ) {
      quiesced = true;
      break;
    }
    await sleep(20);
  }
  // Destroy hooks, 'close' events and finalizers run a few turns after the fact; and Node's own
  // Date-header cache keeps a timer until the next second begins after the last response.
  for (let i = 0; i < 3; i++) {
    await turn();
    gc?.();
    await sleep(10);
  }
  const timersDeadline = Date.now() + 1100;
  while (timersSince(baselineEpoch) > 0 && Date.now() < timersDeadline) await sleep(50);
  gc?.();
  await turn();
  const memory = process.memoryUsage();
  if (label === 'baseline') baselineEpoch = ++timerEpoch;
  const sinceBaseline = timersSince(baselineEpoch);
  if (traceTimers && label !== 'baseline') {
    for (const [id, epoch] of liveTimers) {
      if (epoch >= baselineEpoch)
        console.error(`[soak server] ${label}: a timer still live\n${timerStacks.get(id) ?? ''}`);
    }
  }
  const resources: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) resources[type] = (resources[type] ?? 0) + 1;
  const snapshot: Snapshot = {
    label,
    quiesced,
    heapUsed: memory.heapUsed,
    rss: memory.rss,
    peakHeapUsed: Math.max(peakHeapUsed, memory.heapUsed),
    peakRss: Math.max(peakRss, memory.rss),
    stats: hub.stats(),
    internals: internals(),
    // All of them, the process's own (the HTTP server's connection check, the memory sampler) included.
    timersLive: liveTimers.size,
    timersSinceBaseline: sinceBaseline,
    activeResources: resources,
    processListeners: counted(process.eventNames().map(String), (name) => process.listenerCount(name)),
    serverListeners: counted(server.eventNames().map(String), (name) => server.listenerCount(name)),
    connections: await connections(),
    checksInFlight: checksCalled - checksSettled,
    checksCalled,
    diagnostics: tally(),
    logged: { ...logged },
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    loopDelayMaxMs: loopDelay.max / 1e6,
  };
  loopDelay.reset();
  peakHeapUsed = 0;
  peakRss = 0;
  if (resumePublisher) startPublisher();
  return snapshot;
}

// -------------------------------------------------------------------------------------------------
// The driver's requests
// -------------------------------------------------------------------------------------------------

/** The heap after two full GCs, without waiting for the server to be idle (streams stay open). */
async function collected(): Promise<MemorySample> {
  for (let i = 0; i < 2; i++) {
    await turn();
    gc?.();
  }
  const { heapUsed, rss, external } = process.memoryUsage();
  return { at: now(), heapUsed, rss, external };
}

function stateOf(cycle: number): ResponseState {
  const res = responses.get(cycle);
  if (res === undefined) return 'gone';
  if (res.writableEnded) return 'ended-unflushed';
  return res.writableNeedDrain || res.socket?.writableNeedDrain === true ? 'blocked' : 'writing';
}

async function answer(request: Request): Promise<Reply> {
  switch (request.type) {
    case 'measure':
      return { seq: request.seq, type: 'measure', snapshot: await measure(request.label, request.resumePublisher) };
    case 'blocked':
      return { seq: request.seq, type: 'blocked', state: stateOf(request.cycle) };
    case 'complete':
    case 'close': {
      const started = performance.now();
      await (request.type === 'complete' ? hub.complete() : hub.close());
      return { seq: request.seq, type: request.type, ms: performance.now() - started };
    }
    case 'exit':
      return { seq: request.seq, type: 'exit' };
    case 'publisher':
      if (request.resetSeq) numbered.seq = 0;
      if (request.run) startPublisher();
      else stopPublisher();
      return { seq: request.seq, type: 'publisher', published: numbered.seq, loads: numbered.loads };
    case 'memory': {
      const memory = await collected();
      let watchedBlocked = 0;
      for (const socket of watched.values()) if (socket.writableNeedDrain) watchedBlocked++;
      return { seq: request.seq, type: 'memory', memory, watchedOpen: watched.size, watchedBlocked };
    }
    case 'sample':
      return { seq: request.seq, type: 'sample', sample: takeSample() };
    case 'watched':
      return { seq: request.seq, type: 'watched', watched: watchedReport(request.detail) };
  }
}

process.on('message', (message: Request) => {
  void answer(message).then((reply) => {
    send(reply);
    if (reply.type === 'exit') {
      stopPublisher();
      server.close();
      process.disconnect();
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  // The stuck run starts its publisher once its healthy readers are listening.
  if (!stuckMode) startPublisher();
  send({ type: 'ready', port: (server.address() as AddressInfo).port } satisfies Ready);
});
