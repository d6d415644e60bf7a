/**
 * `npm run soak -- --stuck [--quick] [--stuck-readers=2000] [--healthy=200] [--rate=200] [--load-rate=100]
 * [--stall-ms=30000] [--id-bytes=16384] [--phase-ms=10000] [--churn-ms=15000] [--churn-rate=200] [--seed=1]
 * [--netns=auto|yes|no] [--sndbuf-kib=64] [--rcvbuf-kib=32] [--tcp-mem-limit-mib=N] [--json=FILE]`:
 * issue #14's stopped readers at scale, and load figures under faults, for the Express middleware.
 *
 * The server runs in a process of its own (server.ts in `stuck` mode), as in the soak: what it reports
 * (heap, timers, handles, queues) is its own, and its event loop is not shared with the clients. Its
 * publisher sends `--rate` numbered task events a second to `--healthy` readers, which read everything
 * and check that every event arrives, once and in order (each carries its number and publish time, so
 * the delivery latency is measured per event), and `--load-rate` other events a second (tool list
 * changes, updates of 32 URIs) to every other stream. The healthy readers run in a process of their own
 * too (healthy.ts: this one, which holds the stopped readers, stalls). One run, in phases, side by side:
 *
 * - **baseline**: the healthy readers alone;
 * - **stuck**: `--stuck-readers` more clients, each on a TCP connection of its own, open a listen for
 *   the load events with a `--id-bytes` id (it rides in every frame, so their sockets fill fast), read
 *   the acknowledgement, and never read again; the phase lasts until the server has closed every one
 *   of them as `stalled` (`stallTimeoutMs` is `--stall-ms`); then they read what their sockets held;
 * - **after**: the healthy readers alone again;
 * - **churn**: clients connect and disconnect at `--churn-rate` a second (a fifth leave before the
 *   acknowledgement, three fifths read for 10 to 300 ms, a fifth stop reading and leave 100 to 300 ms
 *   later) while the healthy readers are measured.
 *
 * Reported per phase: healthy delivery latency (p50, p99, max), events and deliveries per second, the
 * server's heap after GC, peak heap and RSS, event-loop delays (server and driver), the kernel's TCP
 * memory; for the stopped readers: the server's memory and the kernel's send queues while all of them
 * are held, the largest queue of one stream against its bound, and the time from a socket's last block
 * to its stream's close against `stallTimeoutMs`. Exit 1 when a guarantee breaks: a stopped reader not
 * closed as `stalled` (every one, exactly once), a stream's queue past its bound, memory per stopped
 * reader past {@link heldBound}, a stalled stream's connection still held by the server's kernel,
 * a healthy event lost, repeated or out of order, a churn cycle that failed, memory not back near its
 * baseline, or anything the soak's leftover checks find (streams, index entries, timers, handles,
 * listeners, connections, closed-exactly-once). `--quick` (64 stopped readers, 16 healthy) takes a
 * few seconds; `npm test` runs it.
 *
 * Thousands of stopped sockets hold kernel memory: on this machine's loopback a stopped reader's
 * connection buffers about 4 MiB (its 64 KiB MTU sizes the send buffer), and every process's TCP shares
 * one kernel limit (`net.ipv4.tcp_mem`). So on Linux the run enters a network namespace of its own
 * (`unshare --net`, as root or with a user namespace) whose loopback caps each socket's send and
 * receive buffers (`--sndbuf-kib`, `--rcvbuf-kib`: `net.ipv4.tcp_wmem` and `tcp_rmem` are per
 * namespace); `--netns=no` stays in the machine's namespace. Either way a guard samples the kernel's TCP
 * memory, which is machine-wide, and stops the run (exit 2) before it passes `--tcp-mem-limit-mib`
 * (default: half the kernel's `tcp_mem` low mark), so that no other process is pushed into TCP memory
 * pressure.
 */
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Listen, type ListenPlan } from './client.ts';
import { now } from '../shared/clock.ts';
import { percentile, prng } from '../shared/stats.ts';
import { cell, type Check, intFlag, leftovers, mib, ROOT, ServerProcess, sleep, sum, table } from './harness.ts';
import {
  type HealthyConfig,
  healthyPlan,
  type HealthyReply,
  type HealthyRequest,
  type HealthyResult,
  SEQ_KEYS,
  type Window,
} from './healthy.ts';
import {
  type MemorySample,
  type PhaseSample,
  type ServerConfig,
  type Snapshot,
  WATCH_POLL_MS,
  type Watched,
} from './messages.ts';

/**
 * How far the server's heap after GC may be above its baseline once the stopped readers are gone (the
 * healthy readers still open, against the same before them), and once every client is gone (against
 * the idle baseline): 2 MiB, and 1 KiB per stopped reader for what is sized by the most streams held
 * at once (the hub's index sets, Node's and this run's maps) or compiled for paths first taken after
 * the baseline (the stall close). Measured: +0.3 MiB with 64, +0.9 to +1.7 MiB with 2,000 to 10,000.
 * A stopped reader kept after its close holds its response, request, socket and id (20 to 80 KB):
 * tried, all 64 of the quick run kept made +2.8 MiB, which the soak's 4 MiB let through.
 */
const heapBound = (stoppedReaders: number): number => 2 * 1024 * 1024 + 1024 * stoppedReaders;
/**
 * What the server may hold per stopped reader while they are all blocked (heap and external memory
 * after GC, over the same with the healthy readers alone), besides what grows with its listen id: an
 * idle stream costs about 10 KB (docs/performance.md), its queue at most its bound in references, and
 * its socket one refused write, which is at most a tick's batch (16 KiB) and one frame.
 */
const HELD_BASE_BYTES = 48 * 1024;

/**
 * The bound per stopped reader: {@link HELD_BASE_BYTES}, and four frames for what grows with the id (the
 * stream keeps the id, its JSON and the request-index key made of it; the refused write ends with a
 * frame). Before the fix of commit c551730 a refused write held up to 64 queued frames: 16 of them
 * (250 KiB) per stopped reader were measured; a queue or a socket that kept every frame of the stall
 * holds hundreds.
 */
function heldBound(frameBytes: number): number {
  return HELD_BASE_BYTES + 4 * frameBytes;
}
/** A reader that has not been acknowledged after this long has hung. */
const ACK_GUARD_MS = 30_000;
/** Connections opened at once while the stopped readers and the healthy readers connect. */
const OPEN_CONCURRENCY = 64;
/** Churn cycles in flight at most: past that the rate is what the machine manages. */
const CHURN_IN_FLIGHT = 256;

// -------------------------------------------------------------------------------------------------
// Options
// -------------------------------------------------------------------------------------------------

const { values: flags } = parseArgs({
  options: {
    stuck: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    'stuck-readers': { type: 'string' },
    healthy: { type: 'string' },
    rate: { type: 'string' },
    'load-rate': { type: 'string' },
    'stall-ms': { type: 'string' },
    'id-bytes': { type: 'string' },
    'phase-ms': { type: 'string' },
    'churn-ms': { type: 'string' },
    'churn-rate': { type: 'string' },
    seed: { type: 'string' },
    netns: { type: 'string', default: 'auto' },
    'sndbuf-kib': { type: 'string' },
    'rcvbuf-kib': { type: 'string' },
    'tcp-mem-limit-mib': { type: 'string' },
    json: { type: 'string' },
  },
});

/** Set in the copy of this run that `inNamespace()` starts inside a network namespace of its own. */
const IN_NAMESPACE = process.env['SOAK_NETNS'] === '1';
const quick = flags.quick === true;
const stuckCount = intFlag('stuck-readers', flags['stuck-readers'], quick ? 64 : 2000, 1);
const healthyCount = intFlag('healthy', flags.healthy, quick ? 16 : 200, 1);
/**
 * Long enough for every stopped reader to connect before the first is closed (2,000 took 8 to 21 s
 * here, with other work beside), so that the server is seen holding all of them at once.
 */
const stallMs = intFlag('stall-ms', flags['stall-ms'], quick ? 1000 : 30_000, 100);
/**
 * The listen id's length: it rides in every frame of a stopped reader, so a loopback socket outside
 * the namespace (4 MiB) fills in a few seconds. And a 16 KiB frame is past a socket's high-water mark
 * by itself: every write of one reports the socket full until Node hands it over, and the drain that
 * follows writes what queued meanwhile, the path where a refused write once held 64 frames (commit
 * c551730). With 2 KiB ids that path is not taken and that defect went unseen (tried).
 */
const idBytes = intFlag('id-bytes', flags['id-bytes'], 16 * 1024, 0);
const phaseMs = intFlag('phase-ms', flags['phase-ms'], quick ? 1000 : 10_000, 100);
const churnMs = intFlag('churn-ms', flags['churn-ms'], quick ? 1500 : 15_000, 0);
const churnRate = intFlag('churn-rate', flags['churn-rate'], quick ? 100 : 200, 1);
const seed = intFlag('seed', flags.seed, 1, 0);
const sndbufKib = intFlag('sndbuf-kib', flags['sndbuf-kib'], 64, 4);
const rcvbufKib = intFlag('rcvbuf-kib', flags['rcvbuf-kib'], 32, 4);
if (!['auto', 'yes', 'no'].includes(flags.netns)) {
  console.error(`soak: --netns expects auto, yes or no, got ${JSON.stringify(flags.netns)}`);
  process.exit(2);
}

/** Load URIs: the stopped readers and churners follow them (with the tool list), the healthy ones none. */
const LOAD_URIS = 32;
const WARMUP_STUCK = 8;
const WARMUP_HEALTHY = 8;
/** Principals `c<n>`: the stopped readers first (their cycle is their index), then warm-up and churn. */
const churnCap = Math.ceil((churnRate * churnMs) / 1000) + CHURN_IN_FLIGHT + 64;
const cycles = stuckCount + WARMUP_STUCK + WARMUP_HEALTHY + healthyCount + churnCap;

const serverConfig: ServerConfig = {
  mode: 'stuck',
  cycles,
  publishRate: intFlag('rate', flags.rate, quick ? 100 : 200, 1),
  loadRate: intFlag('load-rate', flags['load-rate'], 100, 1),
  seqKeys: SEQ_KEYS,
  maxSubscriptionsPerPrincipal: false,
  hotUris: LOAD_URIS,
  keepAliveMs: 1000,
  stallTimeoutMs: stallMs,
  completeTimeoutMs: 500,
  authorizeTimeoutMs: 1000,
  maxChecksInFlight: 256,
  maxBuffer: 16,
};

const random = prng(seed);
const pick = (n: number): number => Math.floor(random() * n);

// -------------------------------------------------------------------------------------------------
// A network namespace of its own, and the guard on the kernel's TCP memory
// -------------------------------------------------------------------------------------------------

/**
 * Runs this very command again inside a new network namespace, when wanted and possible; resolves with
 * its exit code, or `undefined` to run here. As root `unshare --net`; otherwise with a user namespace
 * of its own (`--map-root-user`), where an unprivileged user may still own a network namespace.
 */
async function inNamespace(): Promise<number | undefined> {
  if (IN_NAMESPACE || flags.netns === 'no') return undefined;
  const userns = process.getuid?.() === 0 ? [] : ['--map-root-user'];
  const probe =
    process.platform === 'linux' ? spawnSync('unshare', ['--net', ...userns, 'true'], { stdio: 'ignore' }) : undefined;
  if (probe?.status !== 0) {
    const why = process.platform !== 'linux' ? 'not Linux' : `unshare --net ${userns.join(' ')} failed`;
    if (flags.netns === 'yes') {
      console.error(`soak: --netns=yes, but no network namespace can be made here (${why})`);
      return 2;
    }
    process.stderr.write(`soak: no network namespace (${why}); running in the machine's own\n`);
    return undefined;
  }
  const child = spawn(
    'unshare',
    ['--net', ...userns, '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, SOAK_NETNS: '1', SOAK_TCP_MEM_LIMIT: String(tcpMemLimit) } },
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 2))));
}

/** Inside the namespace: loopback up, and each socket's buffers capped. Says what failed. */
function setUpNamespace(): string | undefined {
  const up = spawnSync('ip', ['link', 'set', 'lo', 'up'], { encoding: 'utf8' });
  if (up.status !== 0) {
    return `ip link set lo up failed (${up.error?.message ?? up.stderr.trim()}): install iproute2, or --netns=no`;
  }
  // min, default, max in bytes; the default is where a socket starts, the max what autotuning may reach.
  const cap = (kib: number): string => `4096 ${Math.min(16_384, kib * 1024)} ${kib * 1024}`;
  try {
    writeFileSync('/proc/sys/net/ipv4/tcp_wmem', cap(sndbufKib));
    writeFileSync('/proc/sys/net/ipv4/tcp_rmem', cap(rcvbufKib));
  } catch (error) {
    return `the namespace's socket buffers cannot be capped (${String(error)}): --netns=no`;
  }
  return undefined;
}

const PAGE_BYTES = (() => {
  const getconf = spawnSync('getconf', ['PAGESIZE'], { encoding: 'utf8' });
  const size = Number(getconf.stdout?.trim());
  return Number.isInteger(size) && size > 0 ? size : 4096;
})();

/** The kernel's TCP memory in bytes, machine-wide (`/proc/net/sockstat`), or NaN where unreadable. */
function tcpMemory(): number {
  try {
    const match = /^TCP:.* mem (\d+)/m.exec(readFileSync('/proc/net/sockstat', 'utf8'));
    return match === null ? Number.NaN : Number(match[1]) * PAGE_BYTES;
  } catch {
    return Number.NaN;
  }
}

/**
 * The guard's limit: `--tcp-mem-limit-mib`, or half of the kernel's low mark (no pressure below it).
 * A network namespace does not show `tcp_mem` (it is machine-wide): the run outside passes it in.
 */
const tcpMemLimit = ((): number => {
  if (flags['tcp-mem-limit-mib'] !== undefined) {
    return intFlag('tcp-mem-limit-mib', flags['tcp-mem-limit-mib'], 0, 1) * 1024 * 1024;
  }
  const passed = Number(process.env['SOAK_TCP_MEM_LIMIT']);
  if (IN_NAMESPACE && passed > 0) return passed;
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/tcp_mem', 'utf8').trim().split(/\s+/)[0]);
    return Number.isFinite(low) && low > 0 ? (low * PAGE_BYTES) / 2 : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
})();

/** The server's sockets as the kernel lists them (`/proc/net/tcp`), by state, with their unsent bytes. */
interface KernelSockets {
  readonly byState: Readonly<Record<string, number>>;
  readonly total: number;
  /** Bytes in their send queues: written by the server, not yet acknowledged by the client's kernel. */
  readonly sendQueued: number;
}

const TCP_STATES: Readonly<Record<string, string>> = {
  '01': 'established',
  '02': 'syn-sent',
  '03': 'syn-recv',
  '04': 'fin-wait-1',
  '05': 'fin-wait-2',
  '06': 'time-wait',
  '07': 'close',
  '08': 'close-wait',
  '09': 'last-ack',
  '0B': 'closing',
};

/**
 * Every socket of the server's port but its listener and those in TIME-WAIT (which hold no buffer): in
 * this namespace, or in the machine's (the port is the server's alone either way).
 */
function kernelSockets(port: number): KernelSockets {
  const byState: Record<string, number> = {};
  let total = 0;
  let sendQueued = 0;
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let text = '';
  try {
    text = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return { byState: { unreadable: 1 }, total: Number.NaN, sendQueued: Number.NaN };
  }
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [, address, , state, queues] = fields;
    if (address === undefined || !address.endsWith(local) || state === '0A' || state === '06') continue;
    const name = TCP_STATES[state ?? ''] ?? `state ${state}`;
    byState[name] = (byState[name] ?? 0) + 1;
    total++;
    sendQueued += parseInt(queues?.split(':')[0] ?? '0', 16);
  }
  return { byState, total, sendQueued };
}

const kernelText = (k: KernelSockets): string =>
  k.total === 0
    ? 'none'
    : `${Object.entries(k.byState)
        .map(([state, n]) => `${n} ${state}`)
        .join(', ')}; ${mib(k.sendQueued)} unsent`;

// -------------------------------------------------------------------------------------------------
// The healthy readers' process, and the phases
// -------------------------------------------------------------------------------------------------

/** The healthy readers, in a process of their own (healthy.ts says why). */
class HealthyProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly acked: number,
  ) {}

  static async start(config: HealthyConfig): Promise<HealthyProcess> {
    const child = fork(path.join(ROOT, 'tools/soak/healthy.ts'), [], {
      cwd: ROOT,
      execArgv: ['--conditions=mcp-subscriptions-source', '--import', 'tsx'],
      env: { ...process.env, SOAK_HEALTHY_CONFIG: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    process.once('exit', () => child.kill('SIGKILL'));
    const ready = await HealthyProcess.reply(child, 'ready', 60_000);
    return new HealthyProcess(child, ready.type === 'ready' ? ready.acked : 0);
  }

  private static reply(child: ChildProcess, type: HealthyReply['type'], ms: number): Promise<HealthyReply> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the healthy readers did not answer ${type} within ${ms} ms`)),
        ms,
      );
      const onExit = (code: number | null): void => reject(new Error(`the healthy readers exited with code ${code}`));
      child.once('exit', onExit);
      child.on('message', function onMessage(reply: HealthyReply) {
        if (reply.type !== type) return;
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(reply);
      });
    });
  }

  /** A phase begins: what the readers' own event loop went through so far belongs to the previous one. */
  mark(name: string): void {
    this.child.send({ type: 'mark', name } satisfies HealthyRequest);
  }

  /** The last event's number and the windows: they wait for it, measure, hang up and exit. */
  async finish(published: number, phases: readonly Window[], segments: readonly Window[]): Promise<HealthyResult> {
    const finished = HealthyProcess.reply(this.child, 'finished', 120_000);
    this.child.send({ type: 'finish', published, phases, segments } satisfies HealthyRequest);
    const reply = await finished;
    return reply.type === 'finished' ? reply.result : Promise.reject(new Error('unexpected reply'));
  }
}

interface Phase {
  readonly name: string;
  start: number;
  end: number;
  sample?: PhaseSample;
  /** Heap after GC at the end of the phase. */
  memory?: MemorySample;
  driverDelayP99Ms: number;
  driverDelayMaxMs: number;
  tcpMemPeak: number;
  opened: number;
  closed: Record<string, number>;
}

const phases: Phase[] = [];
let healthyProcess: HealthyProcess | undefined;
const driverDelay = monitorEventLoopDelay({ resolution: 10 });
driverDelay.enable();
let tcpMemPeak = 0;
let tcpMemOverall = 0;

/**
 * Parts of the stuck phase, for the healthy readers' latency: the stopped readers connecting and
 * filling their sockets, all of them held until the stall timeout, the stall closes, the stopped
 * readers reading again and leaving. The run's own full GC (to measure what the server holds) stops
 * the server: events published during it count in no phase's latency, as no host pays for it.
 */
const segments: { name: string; start: number; end: number; counted: boolean }[] = [];

/** Ends the current segment, and begins `name` unless it is empty. */
function segment(name: string, counted = true): void {
  const at = now();
  const last = segments.at(-1);
  if (last !== undefined && last.end === 0) last.end = at;
  if (name !== '') segments.push({ name, start: at, end: 0, counted });
}

function beginPhase(name: string): Phase {
  const phase: Phase = {
    name,
    start: now(),
    end: 0,
    driverDelayP99Ms: 0,
    driverDelayMaxMs: 0,
    tcpMemPeak: 0,
    opened: 0,
    closed: {},
  };
  phases.push(phase);
  healthyProcess?.mark(name);
  driverDelay.reset();
  tcpMemPeak = 0;
  return phase;
}

async function endPhase(server: ServerProcess, phase: Phase, previous: PhaseSample | undefined): Promise<PhaseSample> {
  phase.end = now();
  phase.driverDelayP99Ms = driverDelay.percentile(99) / 1e6;
  phase.driverDelayMaxMs = driverDelay.max / 1e6;
  phase.tcpMemPeak = tcpMemPeak;
  const { sample } = await server.call('sample');
  phase.sample = sample;
  phase.memory = (await server.call('memory')).memory;
  if (previous !== undefined) {
    phase.opened = sample.stats.opened - previous.stats.opened;
    for (const [reason, n] of Object.entries(sample.stats.closed)) {
      const delta = n - (previous.stats.closed[reason as keyof typeof sample.stats.closed] ?? 0);
      if (delta !== 0) phase.closed[reason] = delta;
    }
  }
  return sample;
}

// -------------------------------------------------------------------------------------------------
// Clients
// -------------------------------------------------------------------------------------------------

const loadUris = (n: number, from = 0): string[] =>
  Array.from({ length: n }, (_, i) => `soak://load/${(from + i) % LOAD_URIS}`);

/** Stops reading: the socket's buffers fill and the server must hold back. */
function stopReading(listen: Listen): void {
  listen.res?.pause();
  listen.res?.socket.pause();
}

function resumeReading(listen: Listen): void {
  listen.res?.socket.resume();
  listen.res?.resume();
}

/** Opens `count` listens, `OPEN_CONCURRENCY` at a time; resolves once each is acknowledged or over. */
async function openMany(
  port: number,
  count: number,
  plan: (i: number) => ListenPlan,
  stopAtAck = false,
): Promise<Listen[]> {
  const listens = new Array<Listen>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const listen = new Listen(port, plan(i), 'full');
      // Stops reading in the very handler that parsed the acknowledgement: nothing after it is read.
      if (stopAtAck) {
        listen.onChunk((self) => {
          if (!self.acked) return;
          stopReading(self);
          // Once: reading again later must not stop it again.
          self.onChunk(() => {});
        });
      }
      listens[i] = listen;
      await listen.until(() => listen.acked || listen.ended, ACK_GUARD_MS);
    }
  };
  await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, count) }, worker));
  return listens;
}

const stuckPlan =
  (offset: number, watch: boolean) =>
  (i: number): ListenPlan => ({
    cycle: offset + i,
    // The long id is in every frame: a stopped reader's socket fills in a few events.
    id: `s${offset + i}-${'x'.repeat(idBytes)}`,
    notifications: { toolsListChanged: true, resourceSubscriptions: loadUris(LOAD_URIS) },
    tasks: false,
    ...(watch ? { headers: { 'x-soak-watch': '1' } } : {}),
  });

type ChurnKind = 'before-ack' | 'reader' | 'stopped';

interface ChurnTally {
  started: number;
  finished: number;
  failed: number;
  byKind: Record<ChurnKind, number>;
  failures: string[];
  elapsedMs: number;
}

async function churnCycle(port: number, cycle: number, tally: ChurnTally): Promise<void> {
  const roll = random();
  const kind: ChurnKind = roll < 0.2 ? 'before-ack' : roll < 0.8 ? 'reader' : 'stopped';
  tally.byKind[kind]++;
  const listen = new Listen(
    port,
    {
      cycle,
      id: `k${cycle}`,
      notifications: { toolsListChanged: true, resourceSubscriptions: loadUris(4, pick(LOAD_URIS)) },
      tasks: false,
    },
    'full',
  );
  let failure: string | undefined;
  if (kind === 'before-ack') {
    await listen.until(() => listen.ended, pick(5));
  } else if (!(await listen.until(() => listen.acked || listen.ended, ACK_GUARD_MS))) {
    failure = 'no acknowledgement';
  } else if (listen.res?.statusCode !== 200) {
    failure = `HTTP ${listen.res?.statusCode ?? '(none)'}`;
  } else if (kind === 'reader') {
    await listen.until(() => listen.ended, 10 + pick(290));
  } else {
    stopReading(listen);
    await sleep(100 + pick(200));
  }
  if (listen.ended && kind !== 'before-ack' && failure === undefined) failure = 'closed by the server';
  listen.hangUp();
  await listen.closed;
  failure ??= listen.problem ?? (listen.completed ? 'a terminal result' : undefined);
  tally.finished++;
  if (failure !== undefined) {
    tally.failed++;
    if (tally.failures.length < 10) tally.failures.push(`cycle ${cycle} (${kind}): ${failure}`);
  }
}

/** Starts a churn cycle every 1/`churnRate` s (catching up when late), at most CHURN_IN_FLIGHT at once. */
async function churn(port: number, from: number): Promise<ChurnTally> {
  const tally: ChurnTally = {
    started: 0,
    finished: 0,
    failed: 0,
    byKind: { 'before-ack': 0, reader: 0, stopped: 0 },
    failures: [],
    elapsedMs: 0,
  };
  const started = performance.now();
  const inFlight = new Set<Promise<void>>();
  while (performance.now() - started < churnMs && tally.started < churnCap) {
    const due = Math.floor(((performance.now() - started) * churnRate) / 1000) - tally.started;
    for (let i = 0; i < due && inFlight.size < CHURN_IN_FLIGHT && tally.started < churnCap; i++) {
      const run = churnCycle(port, from + tally.started++, tally).finally(() => inFlight.delete(run));
      inFlight.add(run);
    }
    await sleep(5);
  }
  await Promise.all(inFlight);
  tally.elapsedMs = performance.now() - started;
  return tally;
}

// -------------------------------------------------------------------------------------------------
// Figures
// -------------------------------------------------------------------------------------------------

const ms = (value: number, digits = 1): string => (Number.isFinite(value) ? `${value.toFixed(digits)} ms` : 'n/a');
const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KiB`;
const signed = (bytes: number): string => `${bytes >= 0 ? '+' : '−'}${mib(Math.abs(bytes))}`;
const perSecond = (n: number, ms: number): string => (ms > 0 ? (n / (ms / 1000)).toFixed(0) : 'n/a');

interface Held {
  /** Server memory after GC, every stopped reader still open blocked (some may be closed already). */
  readonly memory: MemorySample;
  /** How many were open when it was taken, and how many of those had their socket full at that instant. */
  readonly count: number;
  readonly blocked: number;
  readonly kernel: KernelSockets;
  readonly tcpMemory: number;
}

interface StuckOutcome {
  readonly rampMs: number;
  readonly acked: number;
  readonly held: Held | undefined;
  /** Why `held` is missing: the first stall closed a stream before every socket was seen full. */
  readonly heldMissing: string | undefined;
  readonly allClosedMs: number;
  readonly watched: Watched;
  readonly kernelAfterClose: KernelSockets;
  readonly tcpMemoryAfterClose: number;
  /** After they read again: how many saw their connection end, got a terminal result, broke a rule. */
  readonly endedOnResume: number;
  readonly completed: number;
  readonly problems: number;
  readonly bytesAfterAck: number;
}

// -------------------------------------------------------------------------------------------------
// The run
// -------------------------------------------------------------------------------------------------

async function stuckPhase(server: ServerProcess): Promise<StuckOutcome> {
  const t0 = performance.now();
  segment('connecting, sockets filling');
  const stuck = await openMany(server.port, stuckCount, stuckPlan(0, true), true);
  const rampMs = performance.now() - t0;
  const acked = stuck.filter((listen) => listen.acked).length;
  // Once every stopped reader still open has filled its socket (with a slow ramp the first may be
  // closed already), the server holds them all: its memory then, per stopped reader open at that time.
  let held: Held | undefined;
  let heldMissing: string | undefined;
  const fillDeadline = performance.now() + stallMs * 3 + 30_000;
  for (;;) {
    const { watched } = await server.call('watched');
    if (watched.open > 0 && watched.blockedNow >= watched.open) {
      // The kernel first (a glance), then the server's memory (two full GCs, which take a while).
      const kernel = kernelSockets(server.port);
      const tcp = tcpMemory();
      segment("the run's own GC (not counted)", false);
      const reply = await server.call('memory');
      segment('held: every stopped reader still open has filled its socket');
      // Counted when the memory was taken: the stall timeout may have closed some meanwhile.
      held = { memory: reply.memory, count: reply.watchedOpen, blocked: reply.watchedBlocked, kernel, tcpMemory: tcp };
      break;
    }
    if ((watched.open === 0 && watched.closed > 0) || performance.now() > fillDeadline) {
      heldMissing = `${watched.blockedNow} of ${watched.open} open ones blocked, ${watched.closed} closed`;
      break;
    }
    await sleep(50);
  }
  // Then every one closed by the server: by the stall clock, or not at all (the guard, a failed check).
  const closeDeadline = performance.now() + rampMs + stallMs * 3 + 30_000;
  let closing = false;
  for (;;) {
    const { watched } = await server.call('watched');
    if (!closing && watched.closed > 0) {
      closing = true;
      segment('stall closes');
    }
    if (watched.closed >= acked || performance.now() > closeDeadline) break;
    await sleep(50);
  }
  const allClosedMs = performance.now() - t0;
  segment('all closed; the stopped readers read again and leave');
  // The server's kernel, before the clients read or close anything: what the closed streams left behind.
  await sleep(200);
  const kernelAfterClose = kernelSockets(server.port);
  const tcpMemoryAfterClose = tcpMemory();
  const { watched } = await server.call('watched', { detail: { from: 0, to: stuckCount } });
  // They read again: what their sockets held, then the end (no terminal result for a stalled stream).
  const bytesAtAck = sum(stuck.map((listen) => listen.bytes));
  for (const listen of stuck) resumeReading(listen);
  await Promise.all(stuck.map((listen) => listen.until(() => listen.ended, 30_000)));
  const endedOnResume = stuck.filter((listen) => listen.ended).length;
  for (const listen of stuck) listen.hangUp();
  await Promise.all(stuck.map((listen) => listen.closed));
  segment('');
  return {
    rampMs,
    acked,
    held,
    heldMissing,
    allClosedMs,
    watched,
    kernelAfterClose,
    tcpMemoryAfterClose,
    endedOnResume,
    completed: stuck.filter((listen) => listen.completed).length,
    problems: stuck.filter((listen) => listen.problem !== undefined).length,
    bytesAfterAck: sum(stuck.map((listen) => listen.bytes)) - bytesAtAck,
  };
}

async function run(): Promise<number> {
  const unready = IN_NAMESPACE ? setUpNamespace() : undefined;
  if (unready !== undefined) {
    console.error(`soak: ${unready}`);
    return 2;
  }
  const server = await ServerProcess.start(serverConfig);
  const guard = setInterval(() => {
    const bytes = tcpMemory();
    tcpMemPeak = Math.max(tcpMemPeak, bytes);
    tcpMemOverall = Math.max(tcpMemOverall, bytes);
    if (bytes > tcpMemLimit) {
      // Every client socket and the server go at once: their kernel buffers with them.
      console.error(
        `soak: stopped: the kernel's TCP memory reached ${mib(bytes)}, over the guard's ${mib(tcpMemLimit)} ` +
          '(machine-wide: other processes share it). Fewer --stuck-readers, smaller --sndbuf-kib/--rcvbuf-kib, ' +
          'or --tcp-mem-limit-mib.',
      );
      server.child.kill('SIGKILL');
      process.exit(2);
    }
  }, 100);
  guard.unref();
  const inNs = IN_NAMESPACE
    ? `own network namespace, socket buffers ≤ ${sndbufKib}/${rcvbufKib} KiB`
    : 'machine namespace';
  process.stderr.write(
    `soak --stuck: ${stuckCount} stopped readers, ${healthyCount} healthy, ${serverConfig.publishRate} numbered ` +
      `events/s + ${serverConfig.loadRate} load events/s, stallTimeoutMs ${stallMs}, ${inNs}\n`,
  );
  const started = performance.now();

  // Warm-up: every path once (the numbered events, a stopped reader's socket filling, churn), so that
  // the baseline has the compiled code and the pools; then every client leaves.
  const warmHealthy = await openMany(server.port, WARMUP_HEALTHY, healthyPlan(stuckCount));
  const warmStuck = await openMany(server.port, WARMUP_STUCK, stuckPlan(stuckCount + WARMUP_HEALTHY, false), true);
  await server.call('publisher', { run: true, resetSeq: true });
  await sleep(500);
  await server.call('publisher', { run: false, resetSeq: false });
  for (const listen of [...warmHealthy, ...warmStuck]) listen.hangUp();
  await Promise.all([...warmHealthy, ...warmStuck].map((listen) => listen.closed));
  const baseline = (await server.call('measure', { label: 'baseline', resumePublisher: false })).snapshot;

  // The healthy readers, in their own process, then the numbered events from 0.
  const healthy = await HealthyProcess.start({
    port: server.port,
    count: healthyCount,
    firstCycle: stuckCount + WARMUP_STUCK + WARMUP_HEALTHY,
  });
  healthyProcess = healthy;
  let sample = (await server.call('sample')).sample;
  await server.call('publisher', { run: true, resetSeq: true });

  process.stderr.write('soak --stuck: baseline\n');
  let phase = beginPhase('baseline');
  await sleep(phaseMs);
  sample = await endPhase(server, phase, sample);

  process.stderr.write(`soak --stuck: ${stuckCount} stopped readers\n`);
  phase = beginPhase('stuck');
  const outcome = await stuckPhase(server);
  sample = await endPhase(server, phase, sample);

  process.stderr.write('soak --stuck: after\n');
  phase = beginPhase('after');
  await sleep(phaseMs);
  sample = await endPhase(server, phase, sample);

  process.stderr.write(`soak --stuck: churn at ${churnRate}/s\n`);
  phase = beginPhase('churn');
  const churned = await churn(server.port, stuckCount + WARMUP_STUCK + WARMUP_HEALTHY + healthyCount);
  await endPhase(server, phase, sample);

  // The last numbered event reaches every healthy reader, or it was lost; then they leave.
  const { published } = await server.call('publisher', { run: false, resetSeq: false });
  const windows = (list: readonly { name: string; start: number; end: number; counted?: boolean }[]): Window[] =>
    list.map(({ name, start, end, counted }) => ({ name, start, end, counted: counted ?? true }));
  const healthyResult = await healthy.finish(published, windows(phases), windows(segments));
  const end = (await server.call('measure', { label: 'end', resumePublisher: false })).snapshot;
  await server.call('exit');
  const exitCode = await Promise.race([server.exited, sleep(5000).then(() => 'still running' as const)]);
  if (exitCode === 'still running') server.child.kill('SIGKILL');
  clearInterval(guard);
  const totalMs = performance.now() - started;

  return report({
    baseline,
    end,
    healthy: healthyResult,
    published,
    outcome,
    churned,
    exitCode,
    totalMs,
  });
}

interface Results {
  readonly baseline: Snapshot;
  readonly end: Snapshot;
  readonly healthy: HealthyResult;
  readonly published: number;
  readonly outcome: StuckOutcome;
  readonly churned: ChurnTally;
  readonly exitCode: number | null | 'still running';
  readonly totalMs: number;
}

function report(r: Results): number {
  const [a, b, c] = phases as [Phase, Phase, Phase, Phase];
  const { outcome } = r;
  const { watched } = outcome;
  const frameBytes = idBytes + 160;
  const { lost, repeated } = r.healthy;
  const healthyOf = (p: Phase) => r.healthy.phases.find((figures) => figures.name === p.name);
  const heapOf = (m: MemorySample | undefined): number => m?.heapUsed ?? Number.NaN;
  const heldOf = (m: MemorySample | undefined): number => (m === undefined ? Number.NaN : m.heapUsed + m.external);

  // Per stopped reader: from the start of its socket's last block (as polled) to its close.
  const reasons = watched.reasons ?? [];
  const stalled = reasons.filter((reason) => reason === 'stalled').length;
  const blockToClose: number[] = [];
  let closedUnblocked = 0;
  for (let i = 0; i < stuckCount; i++) {
    const last = watched.lastBlockedAt?.[i] ?? 0;
    const closedAt = watched.closedAt?.[i] ?? 0;
    if (closedAt === 0) continue;
    if (last === 0 || last > closedAt) closedUnblocked++;
    else blockToClose.push(closedAt - last);
  }
  const firstBlock = Math.min(...(watched.firstBlockedAt ?? []).filter((t) => t > 0));
  const lastClose = Math.max(...(watched.closedAt ?? []).filter((t) => t > 0));
  const heldPerReader =
    outcome.held === undefined ? Number.NaN : (heldOf(outcome.held.memory) - heldOf(a.memory)) / outcome.held.count;
  const bound = heldBound(frameBytes);
  const queueBound = Math.max(serverConfig.maxBuffer, 1 + LOAD_URIS);
  const maxOverBound = Math.max(...phases.map((p) => p.sample?.maxOverBound ?? 0));
  const afterDelta = heapOf(c.memory) - heapOf(a.memory);
  const endDelta = r.end.heapUsed - r.baseline.heapUsed;

  const endLeftovers = leftovers('end', r.baseline, r.end, false);
  // What the guarantees rest on, by name, for a test to assert (test/stuck.test.ts): counts, not times.
  const guarantees = {
    stuckReaders: stuckCount,
    stuckAcked: outcome.acked,
    stalledPerStream: stalled,
    stalledInStats: b.closed['stalled'] ?? 0,
    stalledOutsideTheStuckPhase: sum(phases.filter((p) => p !== b).map((p) => p.closed['stalled'] ?? 0)),
    closedWithoutBlockSeen: closedUnblocked,
    stuckEndedOnResume: outcome.endedOnResume,
    terminalResultsToStuck: outcome.completed,
    malformedToStuck: outcome.problems,
    maxQueuedPastBound: maxOverBound,
    heldPerReaderBytes: Number.isFinite(heldPerReader) ? Math.round(heldPerReader) : null,
    heldBoundBytes: bound,
    serverSocketsLeftAfterStall: outcome.kernelAfterClose.total - healthyCount,
    healthyReaders: healthyCount,
    healthyAcked: r.healthy.acked,
    healthyOpenAtEnd: r.healthy.stillOpen,
    healthyMalformed: r.healthy.problems,
    numberedEvents: r.published,
    healthyLost: lost,
    healthyRepeated: repeated,
    churnCycles: r.churned.finished,
    churnFailed: r.churned.failed,
    heapAfterVsBeforeBytes: afterDelta,
    heapEndVsBaselineBytes: endDelta,
    heapBoundBytes: heapBound(stuckCount),
    leftoversFailed: endLeftovers.filter((check) => !check.ok).map((check) => check.name),
    serverExitCode: r.exitCode,
  };

  const checks: Check[] = [
    {
      name: 'healthy readers acknowledged, and open until the end',
      observed: `${r.healthy.acked} acknowledged, ${r.healthy.stillOpen} open at the end, of ${healthyCount}`,
      expected: 'all',
      ok: r.healthy.acked === healthyCount && r.healthy.stillOpen === healthyCount,
    },
    {
      name: 'healthy readers: numbered events lost, repeated or out of order; malformed messages',
      observed:
        `${lost} lost, ${repeated} repeated/out of order (${r.published} events × ${healthyCount} readers); ` +
        `${r.healthy.problems} malformed`,
      expected: '0',
      ok: lost === 0 && repeated === 0 && r.healthy.caughtUp && r.healthy.problems === 0,
    },
    {
      name: 'stopped readers acknowledged',
      observed: `${outcome.acked} of ${stuckCount}`,
      expected: 'all',
      ok: outcome.acked === stuckCount,
    },
    {
      name: 'stopped readers closed by the server as stalled (per stream, and stats)',
      observed: `${stalled} stalled of ${stuckCount}; ${watched.closed} closed in all; stats ${b.closed['stalled'] ?? 0}`,
      expected: `${stuckCount} = ${stuckCount} = ${stuckCount}`,
      ok: stalled === stuckCount && watched.closed === stuckCount && b.closed['stalled'] === stuckCount,
    },
    {
      name: 'no stream closed as stalled outside the stuck phase',
      observed: phases.map((p) => `${p.name} ${p.closed['stalled'] ?? 0}`).join(', '),
      expected: `stuck only`,
      ok: phases.every((p) => p === b || (p.closed['stalled'] ?? 0) === 0),
    },
    {
      name: 'a stopped reader is closed only after its socket was seen full',
      observed: `${closedUnblocked} closed without a block seen before`,
      expected: '0',
      ok: closedUnblocked === 0,
    },
    {
      name: 'stopped readers on reading again: the end, no terminal result, nothing malformed',
      observed: `${outcome.endedOnResume} ended, ${outcome.completed} results, ${outcome.problems} malformed`,
      expected: `${stuckCount}, 0, 0`,
      ok: outcome.endedOnResume === stuckCount && outcome.completed === 0 && outcome.problems === 0,
    },
    {
      name: 'queue per stream, over every sample: past its own bound (max(maxBuffer, keys))',
      observed: `at most ${maxOverBound} past it (stopped readers: up to ${Math.max(...phases.map((p) => p.sample?.maxQueued ?? 0))} queued, bound ${queueBound})`,
      expected: '≤ 0',
      ok: maxOverBound <= 0,
    },
    {
      name: 'server memory per stopped reader while all are held (heap + external after GC, over baseline)',
      observed: outcome.held === undefined ? `not measured: ${outcome.heldMissing ?? ''}` : kib(heldPerReader),
      expected: `≤ ${kib(bound)}`,
      ok: outcome.held !== undefined && heldPerReader <= bound,
    },
    {
      name: "stalled connections the server's kernel still holds (all closed, before the clients read)",
      observed: kernelText({
        ...outcome.kernelAfterClose,
        total: outcome.kernelAfterClose.total - healthyCount,
      }),
      expected: `none beyond the ${healthyCount} healthy`,
      ok:
        outcome.kernelAfterClose.total === healthyCount &&
        (outcome.kernelAfterClose.byState['established'] ?? 0) === healthyCount,
    },
    {
      name: 'churn cycles that failed (no ack, refused, closed by the server, malformed)',
      observed: `${r.churned.failed} of ${r.churned.finished}`,
      expected: '0',
      ok: r.churned.failed === 0 && r.churned.finished === r.churned.started,
    },
    {
      name: `heap after GC once the stopped readers are gone, vs before them (${mib(heapOf(a.memory))})`,
      observed: `${signed(afterDelta)} (${mib(heapOf(c.memory))})`,
      expected: `≤ +${mib(heapBound(stuckCount))}`,
      ok: afterDelta <= heapBound(stuckCount),
    },
    ...endLeftovers,
    {
      name: `end: heap after GC vs baseline (${mib(r.baseline.heapUsed)})`,
      observed: `${signed(endDelta)} (${mib(r.end.heapUsed)})`,
      expected: `≤ +${mib(heapBound(stuckCount))}`,
      ok: endDelta <= heapBound(stuckCount),
    },
    {
      name: 'server process exits by itself once closed',
      observed: r.exitCode === 'still running' ? 'still running after 5 s' : `exit code ${r.exitCode}`,
      expected: 'exit code 0',
      ok: r.exitCode === 0,
    },
  ];

  const column = (f: (p: Phase) => string): string[] => phases.map(f);
  const byPhase: string[][] = [
    ['figure', ...phases.map((p) => p.name)],
    ['duration', ...column((p) => `${((p.end - p.start) / 1000).toFixed(1)} s`)],
    [
      `numbered events/s (target ${serverConfig.publishRate})`,
      ...column((p) => perSecond(healthyOf(p)?.events ?? Number.NaN, p.end - p.start)),
    ],
    [
      'deliveries/s to the healthy readers',
      ...column((p) => perSecond(healthyOf(p)?.deliveries ?? Number.NaN, p.end - p.start)),
    ],
    ['healthy delivery latency p50', ...column((p) => ms(healthyOf(p)?.p50Ms ?? Number.NaN, 2))],
    ['healthy delivery latency p99', ...column((p) => ms(healthyOf(p)?.p99Ms ?? Number.NaN, 2))],
    ['healthy delivery latency max', ...column((p) => ms(healthyOf(p)?.maxMs ?? Number.NaN, 1))],
    ['most events queued by one healthy stream', ...column((p) => String(p.sample?.maxQueuedHealthy ?? 'n/a'))],
    ['streams open at most', ...column((p) => String(p.sample?.maxOpen ?? 'n/a'))],
    [
      'streams opened / closed (by reason)',
      ...column(
        (p) =>
          `${p.opened} / ${
            Object.entries(p.closed)
              .map(([k, n]) => `${k} ${n}`)
              .join(', ') || '0'
          }`,
      ),
    ],
    ['most events queued, all streams', ...column((p) => String(p.sample?.maxTotalQueued ?? 'n/a'))],
    ['server heap after GC, phase end', ...column((p) => mib(heapOf(p.memory)))],
    ['server heap + external after GC, phase end', ...column((p) => mib(heldOf(p.memory)))],
    [
      'server peak heap / RSS (sampled, garbage included)',
      ...column((p) => {
        const mem = p.sample?.memory ?? [];
        return `${mib(Math.max(...mem.map((m) => m.heapUsed)))} / ${mib(Math.max(...mem.map((m) => m.rss)))}`;
      }),
    ],
    [
      'server event-loop delay p99 / max',
      ...column((p) => `${ms(p.sample?.loopDelayP99Ms ?? Number.NaN)} / ${ms(p.sample?.loopDelayMaxMs ?? Number.NaN)}`),
    ],
    [
      "healthy readers' client: event-loop delay p99 / max",
      ...column((p) => {
        const delay = r.healthy.loopDelay[p.name];
        return `${ms(delay?.p99Ms ?? Number.NaN)} / ${ms(delay?.maxMs ?? Number.NaN)}`;
      }),
    ],
    [
      "stopped readers' and churners' client: event-loop delay p99 / max",
      ...column((p) => `${ms(p.driverDelayP99Ms)} / ${ms(p.driverDelayMaxMs)}`),
    ],
    ['kernel TCP memory, machine-wide, peak', ...column((p) => mib(p.tcpMemPeak))],
  ];

  const figures: [string, string][] = [
    [
      'run',
      `${(r.totalMs / 1000).toFixed(1)} s; ${IN_NAMESPACE ? `own network namespace, socket buffers ≤ ${sndbufKib} KiB send / ${rcvbufKib} KiB receive` : "the machine's network namespace, its socket buffers"}`,
    ],
    [
      'stopped readers',
      `${stuckCount}, each following the tool list and ${LOAD_URIS} URIs (queue bound ${queueBound}), ${kib(frameBytes)} frames (${idBytes}-byte id)`,
    ],
    [
      'healthy readers',
      `${healthyCount}, each following ${SEQ_KEYS} task ids: ${r.published} numbered events each, ${r.published * healthyCount} deliveries`,
    ],
    ['stopped readers connected and acknowledged', `${outcome.acked} in ${(outcome.rampMs / 1000).toFixed(1)} s`],
    [
      `held: ${outcome.held?.count ?? 0} stopped readers open (${outcome.held?.blocked ?? 0} full at that instant), server after GC`,
      outcome.held === undefined
        ? `not measured: ${outcome.heldMissing ?? ''}`
        : `heap ${signed(heapOf(outcome.held.memory) - heapOf(a.memory))}, heap + external ${signed(heldOf(outcome.held.memory) - heldOf(a.memory))} (${kib(heldPerReader)} per stopped reader), RSS ${signed(outcome.held.memory.rss - (a.memory?.rss ?? 0))}`,
    ],
    [
      "held: the server's kernel sockets",
      outcome.held === undefined
        ? 'n/a'
        : `${kernelText(outcome.held.kernel)} (${kib(outcome.held.kernel.sendQueued / Math.max(1, outcome.acked))} per stopped reader); TCP memory machine-wide ${mib(outcome.held.tcpMemory)}`,
    ],
    [
      'stall closes: first block seen → last stream closed',
      `${((lastClose - firstBlock) / 1000).toFixed(2)} s (stallTimeoutMs ${stallMs} ms; the connections took ${(outcome.rampMs / 1000).toFixed(1)} s)`,
    ],
    [
      'per stopped reader: last block seen → closed as stalled',
      `p50 ${ms(percentile(blockToClose, 50), 0)}, p99 ${ms(percentile(blockToClose, 99), 0)}, min ${ms(percentile(blockToClose, 0), 0)}, max ${ms(percentile(blockToClose, 100), 0)} (the server polls every ${WATCH_POLL_MS} ms)`,
    ],
    ['all stopped readers closed', `${(outcome.allClosedMs / 1000).toFixed(1)} s after the first connected`],
    ...segments.map((part, i): [string, string] => {
      const figures = r.healthy.segments[i];
      return [
        `stuck phase, healthy latency: ${part.name}`,
        `${((part.end - part.start) / 1000).toFixed(1)} s: p50 ${ms(figures?.p50Ms ?? Number.NaN, 2)}, ` +
          `p99 ${ms(figures?.p99Ms ?? Number.NaN, 2)}, max ${ms(figures?.maxMs ?? Number.NaN)}`,
      ];
    }),
    [
      "after the closes: the server's kernel sockets (healthy included)",
      `${kernelText(outcome.kernelAfterClose)}; TCP memory machine-wide ${mib(outcome.tcpMemoryAfterClose)}`,
    ],
    ['stopped readers reading again', `${mib(outcome.bytesAfterAck)} read after the acknowledgement, in all`],
    [
      'churn',
      `${r.churned.started} cycles in ${(r.churned.elapsedMs / 1000).toFixed(1)} s (${perSecond(r.churned.started, r.churned.elapsedMs)}/s, target ${churnRate}/s): ${Object.entries(
        r.churned.byKind,
      )
        .map(([k, n]) => `${k} ${n}`)
        .join(', ')}`,
    ],
    ['kernel TCP memory, machine-wide, peak', `${mib(tcpMemOverall)} (guard ${mib(tcpMemLimit)})`],
  ];

  const ok = checks.every((check) => check.ok);
  console.log(`\nStopped readers at scale and load under faults (seed ${seed})\n`);
  console.log(table(byPhase));
  console.log(`\n${table([['figure', 'value'], ...figures])}\n`);
  console.log(
    table([
      ['check', 'observed', 'expected', ''],
      ...checks.map((check) => [check.name, cell(check.observed, 110), check.expected, check.ok ? 'ok' : 'FAILED']),
    ]),
  );
  if (r.churned.failures.length > 0) console.log(`\nfailed churn cycles:\n  ${r.churned.failures.join('\n  ')}`);
  console.log(
    ok ? '\nsoak --stuck: all checks passed' : `\nsoak --stuck: ${checks.filter((c) => !c.ok).length} check(s) FAILED`,
  );
  if (flags.json !== undefined) {
    writeFileSync(
      flags.json,
      `${JSON.stringify(
        {
          guarantees,
          config: {
            ...serverConfig,
            stuckCount,
            healthyCount,
            idBytes,
            phaseMs,
            churnMs,
            churnRate,
            seed,
            namespace: IN_NAMESPACE,
            sndbufKib,
            rcvbufKib,
          },
          phases: phases.map((p) => ({ ...p, healthy: healthyOf(p) })),
          segments: segments.map((part, i) => ({ ...part, healthy: r.healthy.segments[i] })),
          healthyLoopDelay: r.healthy.loopDelay,
          stuck: {
            ...outcome,
            watched: {
              ...watched,
              firstBlockedAt: undefined,
              lastBlockedAt: undefined,
              closedAt: undefined,
              reasons: undefined,
            },
          },
          blockToCloseMs: {
            p50: percentile(blockToClose, 50),
            p99: percentile(blockToClose, 99),
            max: percentile(blockToClose, 100),
          },
          churn: r.churned,
          figures: Object.fromEntries(figures),
          checks,
          snapshots: [r.baseline, r.end],
        },
        null,
        2,
      )}\n`,
    );
  }
  return ok ? 0 : 1;
}

/** The run: in a network namespace of its own when one can be made (see the top of this file). */
export async function main(): Promise<number> {
  const code = await inNamespace();
  return code ?? run();
}
