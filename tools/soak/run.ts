/**
 * `npm run soak [-- --quick] [--cycles=20000] [--concurrency=32] [--rate=1000] [--waves=8] [--seed=1]
 * [--kinds=a,b] [--json=FILE] [--trace-timers]`: issue #14's soak of the Express middleware (with
 * `--stuck`, its other run: thousands of stopped readers at once, see stuck/main.ts). Listen
 * streams are opened and closed `--cycles` times on loopback, `--concurrency` at a time, under a
 * steady publish load (`--rate` events/s), each cycle ending one way picked at random (`--kinds`
 * restricts them, to chase one path):
 *
 * - `before-ack`: the client leaves while its request is being read or authorized (some of its URIs
 *   have slow, hanging or failing host checks);
 * - `idle`: the client reads for 10 ms to 1 s, then hangs up;
 * - `mid-write`: the client hangs up inside a burst, on the chunk that takes it past a random byte
 *   count (frames carry a long id, so the cut falls inside one);
 * - `backpressured`: the client stops reading until its socket is full (the server says so), then
 *   hangs up;
 * - `stalled`: the same, but the client waits for the server to close it (`stallTimeoutMs`);
 * - `cancelled`: the client posts `notifications/cancelled` for its stream;
 * - `empty`: nothing asked for is honoured: ack, terminal result, end.
 *
 * `--waves` times in the run, `hub.complete()` ends whatever is open at that moment gracefully
 * (blocked streams are cut off after `completeTimeoutMs`), racing with the clients' own exits. At the
 * end: a probe proves that every permit of the engine-wide check bound is free again, then 64 reading
 * streams are ended by `hub.close()` and must each get their terminal result. `--quick` is 400
 * cycles, 32 at a time (a few seconds; `npm test` runs it).
 *
 * The server runs in a process of its own (server.ts), so that the heap, timers and handles it
 * reports are the server's only, and its event loop is not shared with the clients. It is measured
 * after a warm-up (the baseline), halfway, after the cycles and after the close. The run fails
 * (exit 1) unless, after the cycles and again after the close: no stream is open or pending, no index
 * entry, per-principal count, keepalive clock, listener, timer, handle or connection is left over,
 * every stream that opened closed exactly once (hub counters and the diagnostics channels, per
 * stream), no host check is in flight and nothing was logged as an error; no cycle failed; and the
 * heap after GC is within {@link HEAP_BOUND_BYTES} of its baseline and grew by at most
 * {@link SECOND_HALF_BOUND_BYTES} over the second half. It prints a table of figures and checks.
 */
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { cancel, Listen, type ListenPlan } from './client.ts';
import { prng } from '../shared/stats.ts';
import { cell, type Check, intFlag, leftovers, mib, ServerProcess, sleep, sum, table } from './harness.ts';
import type { ResponseState, ServerConfig } from './messages.ts';

/**
 * How far the server's heap after GC may be above its baseline once every stream is gone. The
 * baseline is taken after a warm-up, so code, inline caches and pools are already there; what is
 * left is noise (a few hundred KB run to run) and whatever leaked. One leaked stream keeps its
 * response, request and socket (over 10 KB), so a leak of even a tenth of the cycles exceeds this.
 */
const HEAP_BOUND_BYTES = 4 * 1024 * 1024;
/**
 * How far the heap may grow between the halfway measure and the end. Measured run to run it moves by
 * a few hundred KB either way; 100 bytes kept per cycle would be about 1 MB over the second half of
 * the default run.
 */
const SECOND_HALF_BOUND_BYTES = 1024 * 1024;
/** Streams ended by `hub.close()` at the end. */
const FINAL_STREAMS = 64;
/** A cycle that takes longer than this has hung: the server never answered or never closed. */
const CYCLE_GUARD_MS = 20_000;

// -------------------------------------------------------------------------------------------------
// Options
// -------------------------------------------------------------------------------------------------

/** `--stuck`: the other run of this tool (stuck/main.ts: stopped readers at scale), which reads its own flags. */
const stuckRun = process.argv.slice(2).includes('--stuck');

const { values: flags } = parseArgs({
  args: stuckRun ? [] : process.argv.slice(2),
  options: {
    quick: { type: 'boolean', default: false },
    cycles: { type: 'string' },
    concurrency: { type: 'string' },
    seed: { type: 'string' },
    rate: { type: 'string' },
    waves: { type: 'string' },
    json: { type: 'string' },
    'trace-timers': { type: 'boolean', default: false },
    kinds: { type: 'string' },
  },
});

const quick = flags.quick === true;
const cycles = intFlag('cycles', flags.cycles, quick ? 400 : 20_000, 10);
const concurrency = intFlag('concurrency', flags.concurrency, 32, 1);
const seed = intFlag('seed', flags.seed, 1, 0);
const waves = intFlag('waves', flags.waves, quick ? 2 : 8, 0);
/** Cycles before the baseline: enough for every path to have been compiled and every pool to be filled. */
const warmup = Math.min(1000, Math.max(100, Math.floor(cycles / 20)));

const serverConfig: ServerConfig = {
  mode: 'cycles',
  cycles,
  publishRate: intFlag('rate', flags.rate, 1000, 1),
  loadRate: 0,
  seqKeys: 0,
  maxSubscriptionsPerPrincipal: 32,
  hotUris: 32,
  keepAliveMs: 200,
  stallTimeoutMs: 1000,
  completeTimeoutMs: 500,
  authorizeTimeoutMs: 100,
  maxChecksInFlight: 64,
};

// -------------------------------------------------------------------------------------------------
// Choices
// -------------------------------------------------------------------------------------------------

const random = prng(seed);
const pick = (n: number): number => Math.floor(random() * n);
const chance = (p: number): boolean => random() < p;

// -------------------------------------------------------------------------------------------------
// The cycles
// -------------------------------------------------------------------------------------------------

const KINDS = ['before-ack', 'idle', 'mid-write', 'backpressured', 'stalled', 'cancelled', 'empty'] as const;
type Kind = (typeof KINDS)[number];
/** Weights, in percent. */
const WEIGHTS: Record<Kind, number> = {
  'before-ack': 18,
  idle: 16,
  'mid-write': 22,
  backpressured: 18,
  stalled: 2,
  cancelled: 18,
  empty: 6,
};

/** `--kinds=a,b`: only those kinds, in their proportions (to chase one path). */
const chosenKinds: readonly Kind[] = (() => {
  if (flags.kinds === undefined) return KINDS;
  const names = flags.kinds.split(',');
  const unknown = names.filter((name) => !(KINDS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    console.error(`soak: --kinds expects some of ${KINDS.join(', ')}; unknown: ${unknown.join(', ')}`);
    process.exit(2);
  }
  return names as Kind[];
})();
const totalWeight = sum(chosenKinds.map((kind) => WEIGHTS[kind]));

function kindOf(): Kind {
  let roll = random() * totalWeight;
  for (const kind of chosenKinds) {
    roll -= WEIGHTS[kind];
    if (roll < 0) return kind;
  }
  return chosenKinds[0]!;
}

const hot = (n: number): string[] =>
  Array.from({ length: n }, (_, i) => `soak://hot/${(i + pick(serverConfig.hotUris)) % serverConfig.hotUris}`);

function idFor(cycle: number, length: number): string | number {
  if (length === 0) return chance(0.5) ? cycle : `c${cycle}`;
  return `c${cycle}-${'x'.repeat(length)}`;
}

/** What a cycle asks for: a mix of flags, URIs whose checks pass, wait, hang, throw or refuse, and task ids. */
function planFor(cycle: number, kind: Kind): ListenPlan {
  if (kind === 'empty') {
    return { cycle, id: idFor(cycle, 0), notifications: { resourceSubscriptions: ['soak://denied/x'] }, tasks: false };
  }
  if (kind === 'backpressured' || kind === 'stalled' || kind === 'mid-write') {
    // Long ids ride in every frame: a socket fills in a few hundred events, a cut falls inside a frame.
    const idLength = kind === 'mid-write' ? 1024 + pick(7 * 1024) : 32 * 1024;
    return {
      cycle,
      id: idFor(cycle, idLength),
      notifications: {
        toolsListChanged: true,
        resourceSubscriptions: kind === 'mid-write' ? hot(8 + pick(24)) : hot(serverConfig.hotUris),
      },
      tasks: false,
    };
  }
  const uris = [`soak://own/c${cycle}`, ...hot(pick(5))];
  if (chance(0.3)) for (let i = 1 + pick(3); i > 0; i--) uris.push(`soak://slow/c${cycle}-${i}`);
  if (chance(0.05)) uris.push(`soak://hang/c${cycle}`);
  if (chance(0.05)) uris.push(`soak://throw/c${cycle}`);
  if (chance(0.1)) uris.push(`soak://denied/c${cycle}`);
  const tasks = chance(0.3);
  return {
    cycle,
    id: idFor(cycle, 0),
    notifications: {
      ...(chance(0.9) ? { toolsListChanged: true } : {}),
      ...(chance(0.3) ? { promptsListChanged: true } : {}),
      ...(chance(0.3) ? { resourcesListChanged: true } : {}),
      resourceSubscriptions: uris,
      ...(tasks ? { taskIds: [`c${cycle}:t`, `c${cycle + 1}:t`] } : {}),
    },
    tasks,
  };
}

interface Outcome {
  readonly kind: Kind;
  /** `undefined` when the cycle went as it may. */
  readonly failure: string | undefined;
  readonly acked: boolean;
  /** Ended by the server with its terminal result (an `empty` stream, or a `complete()` wave). */
  readonly completed: boolean;
  /** For `backpressured` and `stalled`: the server reported the stream's socket full. */
  readonly blocked?: boolean;
}

/** Polls the server until the cycle's response is in `wanted` (or gone); its last state. */
async function waitFor(
  server: ServerProcess,
  cycle: number,
  wanted: ResponseState,
  ms: number,
): Promise<ResponseState> {
  const deadline = performance.now() + ms;
  for (;;) {
    const { state } = await server.call('blocked', { cycle });
    if (state === wanted || state === 'gone' || performance.now() >= deadline) return state;
    await sleep(10);
  }
}

async function runCycle(server: ServerProcess, cycle: number): Promise<Outcome> {
  const kind = kindOf();
  const plan = planFor(cycle, kind);
  const beforeAck = kind === 'before-ack';
  const variant = pick(3);
  // A partial body: the fraction of it sent, drawn here so that the seed makes the same choices.
  const listen = new Listen(server.port, plan, beforeAck && variant === 0 ? random() : 'full');
  let blocked: boolean | undefined;
  let failure: string | undefined;

  const script = async (): Promise<void> => {
    if (beforeAck) {
      // 0: half a body, then gone; 1: the whole request, gone in the same tick; 2: gone within 5 ms,
      // while its URIs are being checked, or as the response starts.
      if (variant === 2) await listen.until(() => listen.res !== undefined, pick(6));
      listen.hangUp();
      return;
    }
    if (!(await listen.until(() => listen.acked || listen.ended, CYCLE_GUARD_MS))) {
      failure = 'no acknowledgement';
      return;
    }
    if (listen.res?.statusCode !== 200) {
      failure = `HTTP ${listen.res?.statusCode ?? '(none)'}`;
      return;
    }
    switch (kind) {
      case 'idle':
        await listen.until(() => listen.ended, 10 + pick(990));
        listen.hangUp();
        return;
      case 'mid-write': {
        const target = listen.bytes + 1024 + pick(127 * 1024);
        listen.onChunk((self) => {
          if (self.bytes >= target) self.hangUp();
        });
        if (!(await listen.until(() => listen.ended, 2000))) listen.hangUp();
        return;
      }
      case 'backpressured':
      case 'stalled': {
        listen.res.pause();
        blocked = (await waitFor(server, cycle, 'blocked', 3000)) === 'blocked';
        if (kind === 'stalled' && blocked) {
          // The server closes it: stallTimeoutMs, or a complete() wave's cut-off. A client that reads
          // nothing cannot see that; the server can.
          const state = await waitFor(server, cycle, 'gone', serverConfig.stallTimeoutMs + 5000);
          if (state !== 'gone') failure = `a stalled stream the server did not close (${state})`;
          // What was buffered, then the end: a stream closed as stalled gets no terminal result.
          listen.res.resume();
          await listen.until(() => listen.ended, 10_000);
        } else {
          await sleep(pick(200));
        }
        listen.hangUp();
        return;
      }
      case 'cancelled': {
        await sleep(pick(100));
        const status = await cancel(server.port, plan);
        // 202: it was cancelled; anything else: it was already gone (a complete() wave).
        if (!(await listen.until(() => listen.ended, 10_000))) {
          failure = `cancelled (HTTP ${status}) but still open`;
        } else if (status === 202 && listen.completed) {
          failure = 'a terminal result after its cancellation';
        }
        listen.hangUp();
        return;
      }
      case 'empty':
        if (!(await listen.until(() => listen.ended, 10_000)) || !listen.completed) {
          failure = 'an empty listen that did not complete at once';
        }
        listen.hangUp();
        return;
    }
  };

  const guard = sleep(CYCLE_GUARD_MS).then(() => 'hung' as const);
  const outcome = await Promise.race([script().then(() => listen.closed), guard]);
  if (outcome === 'hung') {
    failure ??= 'hung';
    listen.hangUp();
  }
  await listen.closed;
  failure ??= listen.problem;
  return {
    kind,
    failure,
    acked: listen.acked,
    completed: listen.completed,
    ...(blocked === undefined ? {} : { blocked }),
  };
}

// -------------------------------------------------------------------------------------------------
// The run
// -------------------------------------------------------------------------------------------------

interface KindTally {
  cycles: number;
  failed: number;
  acked: number;
  completed: number;
  blocked: number;
}

const tallies = Object.fromEntries(
  KINDS.map((kind) => [kind, { cycles: 0, failed: 0, acked: 0, completed: 0, blocked: 0 }]),
) as Record<Kind, KindTally>;
const failures: string[] = [];
const waveMs: number[] = [];

async function runCycles(server: ServerProcess, from: number, to: number, waveCount: number): Promise<void> {
  // Evenly spread over the range, never at its very start or end.
  const waveAt = new Set(
    Array.from({ length: waveCount }, (_, k) => from + Math.round(((k + 1) * (to - from)) / (waveCount + 1))),
  );
  let next = from;
  let done = 0;
  const started = performance.now();
  const wavesInFlight: Promise<void>[] = [];
  const worker = async (): Promise<void> => {
    while (next < to) {
      const cycle = next++;
      if (waveAt.has(cycle)) {
        wavesInFlight.push(server.call('complete').then(({ ms }) => void waveMs.push(ms)));
      }
      const outcome = await runCycle(server, cycle);
      const tally = tallies[outcome.kind];
      tally.cycles++;
      if (outcome.acked) tally.acked++;
      if (outcome.completed) tally.completed++;
      if (outcome.blocked === true) tally.blocked++;
      if (outcome.failure !== undefined) {
        tally.failed++;
        if (failures.length < 20) failures.push(`cycle ${cycle} (${outcome.kind}): ${outcome.failure}`);
      }
      done++;
      if (done % Math.max(1, Math.floor((to - from) / 10)) === 0) {
        const rate = done / ((performance.now() - started) / 1000);
        process.stderr.write(`soak: ${from + done}/${cycles} cycles, ${rate.toFixed(0)}/s\n`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await Promise.all(wavesInFlight);
}

/**
 * Every permit of the engine's check bound is free: `maxChecksInFlight` URIs whose checks answer
 * only once all of them are in flight at once. Returns how many the acknowledgement honoured.
 */
async function permitProbe(server: ServerProcess): Promise<number> {
  const n = serverConfig.maxChecksInFlight;
  const listen = new Listen(
    server.port,
    {
      cycle: cycles, // past the per-cycle tallies
      id: 'probe',
      notifications: { resourceSubscriptions: Array.from({ length: n }, (_, i) => `soak://barrier/${i}`) },
      tasks: false,
    },
    'full',
  );
  await listen.until(() => listen.acked || listen.ended, 10_000);
  listen.hangUp();
  await listen.closed;
  return (listen.ack.match(/soak:\/\/barrier\//g) ?? []).length;
}

/** `FINAL_STREAMS` reading streams, then `hub.close()`: how many got their terminal result. */
async function finalClose(server: ServerProcess): Promise<{ completed: number; ms: number; problems: number }> {
  const listens = Array.from(
    { length: FINAL_STREAMS },
    (_, i) =>
      new Listen(
        server.port,
        {
          cycle: cycles + 1 + i,
          id: i % 2 === 0 ? i : `final-${i}`,
          notifications: { toolsListChanged: true, resourceSubscriptions: hot(4) },
          tasks: false,
        },
        'full',
      ),
  );
  await Promise.all(listens.map((listen) => listen.until(() => listen.acked || listen.ended, 10_000)));
  const { ms } = await server.call('close');
  await Promise.all(listens.map((listen) => listen.until(() => listen.ended, 10_000)));
  for (const listen of listens) listen.hangUp();
  return {
    completed: listens.filter((listen) => listen.completed).length,
    ms,
    problems: listens.filter((listen) => listen.problem !== undefined).length,
  };
}

// -------------------------------------------------------------------------------------------------
// Checks and report
// -------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const server = await ServerProcess.start(serverConfig, flags['trace-timers'] === true);
  process.stderr.write(
    `soak: ${cycles} cycles (${warmup} of warm-up), ${concurrency} at a time, ${serverConfig.publishRate} events/s, ` +
      `${waves} complete() waves, seed ${seed}\n`,
  );
  const started = performance.now();
  await runCycles(server, 0, warmup, 0);
  const baseline = (await server.call('measure', { label: 'baseline', resumePublisher: true })).snapshot;
  // Halfway, the server is measured again: a heap that keeps growing from there on is a leak that
  // the baseline's margin alone could hide.
  const halfway = warmup + Math.floor((cycles - warmup) / 2);
  const mainStarted = performance.now();
  await runCycles(server, warmup, halfway, Math.floor(waves / 2));
  const midway = (await server.call('measure', { label: 'halfway', resumePublisher: true })).snapshot;
  await runCycles(server, halfway, cycles, waves - Math.floor(waves / 2));
  const mainMs = performance.now() - mainStarted;
  const probe = await permitProbe(server);
  const after = (await server.call('measure', { label: 'after cycles', resumePublisher: false })).snapshot;
  const final = await finalClose(server);
  const closed = (await server.call('measure', { label: 'after close', resumePublisher: false })).snapshot;
  await server.call('exit');
  const exitCode = await Promise.race([server.exited, sleep(5000).then(() => 'still running' as const)]);
  if (exitCode === 'still running') server.child.kill('SIGKILL');
  const totalMs = performance.now() - started;

  const failed = sum(Object.values(tallies).map((t) => t.failed));
  const pressured = tallies.backpressured.cycles + tallies.stalled.cycles;
  const blocked = tallies.backpressured.blocked + tallies.stalled.blocked;
  const heapDelta = after.heapUsed - baseline.heapUsed;
  const secondHalf = after.heapUsed - midway.heapUsed;
  const checks: Check[] = [
    {
      name: 'cycles that failed (hung, refused, wrong message)',
      observed: String(failed),
      expected: '0',
      ok: failed === 0,
    },
    {
      name: 'backpressured cycles whose socket filled',
      observed: `${blocked} of ${pressured}`,
      expected: '> 0',
      ok: pressured === 0 || blocked > 0,
    },
    {
      // Bounded, not fast: the slack is for a loaded machine's event loop, not for the streams.
      name: 'complete() waves end within completeTimeoutMs (+2 s of slack)',
      observed: waveMs.length === 0 ? 'no wave' : `at most ${Math.max(...waveMs).toFixed(0)} ms`,
      expected: `≤ ${serverConfig.completeTimeoutMs + 2000} ms`,
      ok: waveMs.every((ms) => ms <= serverConfig.completeTimeoutMs + 2000),
    },
    {
      name: 'permit probe: checks in flight at once',
      observed: `${probe} of ${serverConfig.maxChecksInFlight}`,
      expected: 'all',
      ok: probe === serverConfig.maxChecksInFlight,
    },
    ...leftovers('after cycles', baseline, after, false),
    {
      name: `after cycles: heap after GC vs baseline (${mib(baseline.heapUsed)})`,
      observed: `${heapDelta >= 0 ? '+' : ''}${(heapDelta / 1024).toFixed(0)} KiB (${mib(after.heapUsed)})`,
      expected: `≤ +${mib(HEAP_BOUND_BYTES)}`,
      ok: heapDelta <= HEAP_BOUND_BYTES,
    },
    {
      name: `after cycles: heap growth over the second half (from ${mib(midway.heapUsed)})`,
      observed: `${secondHalf >= 0 ? '+' : ''}${(secondHalf / 1024).toFixed(0)} KiB over ${cycles - halfway} cycles`,
      expected: `≤ +${mib(SECOND_HALF_BOUND_BYTES)}`,
      ok: secondHalf <= SECOND_HALF_BOUND_BYTES,
    },
    {
      name: `hub.close() with ${FINAL_STREAMS} reading streams: terminal results`,
      observed: `${final.completed} of ${FINAL_STREAMS}, ${final.problems} wrong, ${final.ms.toFixed(0)} ms`,
      expected: 'all',
      ok: final.completed === FINAL_STREAMS && final.problems === 0,
    },
    ...leftovers('after close', baseline, closed, true),
    {
      name: 'server process exits by itself once closed',
      observed: exitCode === 'still running' ? 'still running after 5 s' : `exit code ${exitCode}`,
      expected: 'exit code 0',
      ok: exitCode === 0,
    },
  ];

  const s = after.stats;
  const figures: [string, string][] = [
    ['cycles', `${cycles} (${warmup} warm-up + ${cycles - warmup} measured), ${concurrency} at a time`],
    [
      'duration',
      `${(totalMs / 1000).toFixed(1)} s in all; measured phase ${((cycles - warmup) / (mainMs / 1000)).toFixed(0)} cycles/s`,
    ],
    [
      'publish load',
      `${serverConfig.publishRate} events/s; ${s.published} published, ${s.written} frames written, ${s.coalesced} coalesced, ${s.dropped} dropped`,
    ],
    ['streams opened / closed', `${s.opened} / ${sum(Object.values(s.closed))}`],
    [
      'closed by reason',
      Object.entries(s.closed)
        .map(([reason, n]) => `${reason} ${n}`)
        .join(', '),
    ],
    ['cut off while completing', String(s.cutOff)],
    [
      'complete() waves',
      waveMs.length === 0
        ? 'none'
        : `${waveMs.length}, each over in at most ${Math.max(...waveMs).toFixed(0)} ms ` +
          `(completeTimeoutMs ${serverConfig.completeTimeoutMs} ms cuts off a blocked stream)`,
    ],
    ['host checks called', String(after.checksCalled)],
    [
      'heap after GC',
      `baseline ${mib(baseline.heapUsed)}, halfway ${mib(midway.heapUsed)}, after cycles ${mib(after.heapUsed)}, after close ${mib(closed.heapUsed)}`,
    ],
    [
      'peak heap / RSS (measured phase)',
      `${mib(Math.max(midway.peakHeapUsed, after.peakHeapUsed))} / ${mib(Math.max(midway.peakRss, after.peakRss))}`,
    ],
    [
      'server event-loop delay (measured phase)',
      `p99 ${Math.max(midway.loopDelayP99Ms, after.loopDelayP99Ms).toFixed(1)} ms (the worse half), ` +
        `max ${Math.max(midway.loopDelayMaxMs, after.loopDelayMaxMs).toFixed(1)} ms`,
    ],
    [
      'live timers (baseline / after cycles / after close)',
      `${baseline.timersLive} / ${after.timersLive} / ${closed.timersLive}`,
    ],
  ];
  const kinds = [
    ['kind', 'cycles', 'acked', 'completed by server', 'socket filled', 'failed'],
    ...KINDS.map((kind) => {
      const t = tallies[kind];
      const pressure = kind === 'backpressured' || kind === 'stalled';
      return [
        kind,
        String(t.cycles),
        String(t.acked),
        String(t.completed),
        pressure ? String(t.blocked) : '',
        String(t.failed),
      ];
    }),
  ];
  const ok = checks.every((check) => check.ok);
  console.log(`\nSoak of the Express middleware (seed ${seed})\n`);
  console.log(table([['figure', 'value'], ...figures]));
  console.log(`\n${table(kinds)}\n`);
  console.log(
    table([
      ['check', 'observed', 'expected', ''],
      ...checks.map((c) => [c.name, cell(c.observed), c.expected, c.ok ? 'ok' : 'FAILED']),
    ]),
  );
  if (failures.length > 0) console.log(`\nfailed cycles (first ${failures.length}):\n  ${failures.join('\n  ')}`);
  console.log(ok ? '\nsoak: all checks passed' : `\nsoak: ${checks.filter((c) => !c.ok).length} check(s) FAILED`);
  if (flags.json !== undefined) {
    writeFileSync(
      flags.json,
      `${JSON.stringify({ config: { ...serverConfig, warmup, concurrency, seed, waves }, figures: Object.fromEntries(figures), kinds: tallies, checks, snapshots: [baseline, midway, after, closed] }, null, 2)}\n`,
    );
  }
  return ok ? 0 : 1;
}

(stuckRun ? import('./stuck/main.ts').then((stuck) => stuck.main()) : main()).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('soak: the run itself failed:', error);
    process.exit(1);
  },
);
