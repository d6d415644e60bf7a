/**
 * One chaos run (issue 29, PostgreSQL: issue 30): three sample processes (`sample-app/express`) joined
 * over a Redis or a PostgreSQL of the run's own, driven by this process through the schedule of one seed (schedule.ts): listens, closes,
 * cancels and publishes over a small key pool, with faults injected and healed. At each quiescence
 * (the fault healed, then a bounded wait for recovery) the five invariants of checks.ts are checked
 * against what the clients received, what Redis holds or PostgreSQL delivers, and what each hub counts.
 *
 * The schedule is the seed's alone; the timing of a real machine is not, so a replay runs the same
 * operations and faults in the same order, not necessarily with the same interleavings.
 */
import { performance } from 'node:perf_hooks';
import { api, postCancel, startSample, TOKENS, type SampleApp } from '../../test/helpers/sample-app.ts';
import { clusterBackend, postgresBackend, singleBackend, type Backend } from './backends.ts';
import {
  checkCounters,
  checkDelivery,
  checkDuplicates,
  checkIsolation,
  type ChangeRecord,
  type FaultRecord,
  type HubCounters,
  type StreamRecord,
  type Violation,
} from './checks.ts';
import { Listener } from './listener.ts';
import { cancelChannel, keyChannel } from './redis.ts';
import {
  ALL_KEYS,
  describeStep,
  listKey,
  NODES,
  PRINCIPALS,
  schedule,
  type Engine,
  type Fault,
  type Key,
  type Op,
  type Step,
} from './schedule.ts';

export interface ChaosOptions {
  readonly seed: number;
  readonly steps: number;
  readonly engine: Engine;
  /** Every step and fault as it happens. */
  readonly verbose?: boolean;
  readonly log?: (line: string) => void;
}

/** A violation, where and when it was found. */
export interface Failure extends Violation {
  readonly seed: number;
  /** The schedule step of the quiescence that found it. */
  readonly step: number;
  /** The fault of the round it was found in (`final`: the check after every stream was closed). */
  readonly fault: string;
}

export interface ChaosReport {
  readonly seed: number;
  readonly steps: number;
  readonly engine: Engine;
  readonly failures: Failure[];
  readonly counts: {
    listens: number;
    acknowledged: number;
    refused: number;
    notifications: number;
    changes: number;
    faults: Record<string, number>;
    quiescences: number;
  };
  readonly durationMs: number;
}

/** How long the bus keeps a channel no stream follows (1 s), with a margin: invariant 3 waits it out. */
const LINGER_MS = 1500;
/** After the linger, how long the checks that wait for recovery (1, 3, 4) are retried before they fail. */
const RECOVERY_MS = 5000;
/** How long every node may take to say its bus is connected again. */
const CONNECT_MS = 30_000;
/** How long operations still in flight at a quiescence are waited for. */
const SETTLE_OPS_MS = 20_000;

/** The note node `node`'s probe listen follows, before the schedule starts. */
const probeUri = (node: number): string => `note://shared/chaos-probe-${node}`;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const token = (principal: string): string => TOKENS[principal as keyof typeof TOKENS];

interface NodeStats extends HubCounters {
  bus?: { connected: boolean; reconnects?: number; resubscribes?: number } & Record<string, unknown>;
}

/** `promise`, or `undefined` once `ms` passed. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  const started = performance.now();
  const steps = schedule({ seed: options.seed, steps: options.steps, engine: options.engine });
  const backend: Backend =
    options.engine === 'postgres'
      ? await postgresBackend()
      : options.engine === 'cluster'
        ? await clusterBackend()
        : await singleBackend();
  const nodes: SampleApp[] = [];
  try {
    const env = { MAX_SUBSCRIPTIONS_PER_PRINCIPAL: '1000', MAX_SUBSCRIPTIONS: '5000' };
    nodes.push(
      ...(await Promise.all(
        Array.from({ length: NODES }, (_, node) => startSample('express', { ...env, ...backend.env(node) })),
      )),
    );
    const run = new Run(options, log, backend, nodes, steps);
    await run.identify();
    await run.play();
    return run.report(performance.now() - started);
  } finally {
    await Promise.all(nodes.map((node) => node.stop('SIGTERM', 8000).catch(() => node.child.kill('SIGKILL'))));
    await backend.stop();
  }
}

class Run {
  private readonly streams: StreamRecord[] = [];
  private readonly listeners = new Map<number, Listener>();
  private readonly changes: ChangeRecord[] = [];
  private readonly faults: FaultRecord[] = [];
  private readonly failures: Failure[] = [];
  private readonly reported = new Set<string>();
  /** Invariant 3's violations at the last check: one still there is not reported again. */
  private lastLeaksAndHoles = new Set<string>();
  private readonly inflight = new Set<Promise<unknown>>();
  /** Node i's name on the server: its subscriber connection on Redis (`<prefix>:<nodeId>:sub`), its role on PostgreSQL. */
  private nodeNames: string[] = [];
  private current: { record: FaultRecord; kind: string; before: number } | undefined;
  private roundFault = 'none';
  private quiescences = 0;
  private readonly faultCounts: Record<string, number> = {};

  constructor(
    private readonly options: ChaosOptions,
    private readonly log: (line: string) => void,
    private readonly backend: Backend,
    private readonly nodes: readonly SampleApp[],
    private readonly steps: readonly Step[],
  ) {}

  /**
   * Which subscriber connection on Redis is which node's: node by node, a probe stream follows a note
   * of its own, and the one connection whose channels grew is that node's. (The bus names its
   * connections `<prefix>:<nodeId>:sub`; a sample's node id is random.)
   */
  async identify(): Promise<void> {
    if (this.backend.nodeNames !== undefined || this.backend.subscribers === undefined) {
      this.nodeNames = [...(this.backend.nodeNames ?? [])];
      return;
    }
    for (let node = 0; node < this.nodes.length; node++) {
      const before = await this.backend.subscribers();
      const record = this.newRecord(-1 - node, node, 'alice', [], [probeUri(node)]);
      const probe = new Listener(record, (this.nodes[node] as SampleApp).url, token('alice'));
      probe.open();
      await within(probe.acknowledged, 10_000);
      if (record.ackAt === undefined) throw new Error(`n${node} did not acknowledge the probe listen`);
      let found: string | undefined;
      const deadline = performance.now() + 10_000;
      while (found === undefined && performance.now() < deadline) {
        const after = await this.backend.subscribers();
        found = [...after].find(
          ([name, held]) => held.total > (before.get(name)?.total ?? 0) && !this.nodeNames.includes(name),
        )?.[0];
        if (found === undefined) await sleep(50);
      }
      probe.close();
      if (found === undefined) throw new Error(`could not tell n${node}'s subscriber connection on Redis`);
      this.nodeNames.push(found);
    }
    if (this.options.verbose) this.log(`chaos: nodes ${this.nodeNames.map((name, i) => `n${i}=${name}`).join(' ')}`);
  }

  async play(): Promise<void> {
    // A clean start: the probes' channels let go, every invariant holding before the first operation.
    this.roundFault = 'start';
    await this.quiesce(-1);
    this.roundFault = 'none';
    for (const step of this.steps) {
      if (step.delayMs > 0) await sleep(step.delayMs);
      this.checkAlive();
      if (this.options.verbose) this.log(`chaos: ${describeStep(step)}`);
      await this.perform(step.index, step.op);
    }
    // The end: every stream closed, then Redis must hold the fixed channels only and every hub count zero.
    for (const listener of this.listeners.values()) listener.close();
    this.roundFault = 'final';
    await this.quiesce(this.steps.length);
  }

  private checkAlive(): void {
    this.nodes.forEach((node, i) => {
      if (node.child.exitCode !== null || node.child.signalCode !== null) {
        throw new Error(
          `n${i} exited (${node.child.exitCode ?? node.child.signalCode}):\n${node.stderr().slice(-2000)}`,
        );
      }
    });
  }

  private track(promise: Promise<unknown>): void {
    const tracked = promise.catch(() => {}).finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
  }

  private newRecord(
    step: number,
    node: number,
    principal: string,
    lists: StreamRecord['asked']['lists'],
    uris: readonly string[],
  ): StreamRecord {
    const record: StreamRecord = {
      step,
      id: `chaos-${this.options.seed}-${step}`,
      node,
      principal,
      asked: { lists, uris },
      listenAt: performance.now(),
      received: [],
      strange: [],
    };
    return record;
  }

  private async perform(index: number, op: Op): Promise<void> {
    switch (op.type) {
      case 'listen': {
        const record = this.newRecord(index, op.node, op.principal, op.lists, op.uris);
        this.streams.push(record);
        const listener = new Listener(record, (this.nodes[op.node] as SampleApp).url, token(op.principal));
        this.listeners.set(index, listener);
        listener.open();
        this.track(listener.acknowledged);
        return;
      }
      case 'close':
        this.listeners.get(op.listen)?.close();
        return;
      case 'cancel': {
        const listener = this.listeners.get(op.listen);
        if (listener === undefined || listener.record.endAt !== undefined) return;
        this.track(postCancel(this.nodes[op.node] as SampleApp, token(listener.record.principal), listener.record.id));
        return;
      }
      case 'put':
      case 'delete': {
        const route = `/api/notes/${op.uri.slice('note://'.length)}`;
        const body = op.type === 'put' ? { text: `step ${index}` } : undefined;
        const success = op.type === 'put' ? [200, 201] : [204];
        this.change(
          index,
          op.node,
          [op.uri, listKey('resources')],
          op.principal,
          op.type.toUpperCase(),
          route,
          body,
          (status) => (success.includes(status) ? (status === 200 ? [op.uri] : [op.uri, listKey('resources')]) : []),
        );
        return;
      }
      case 'catalog':
        this.change(
          index,
          op.node,
          [listKey(op.list)],
          op.principal,
          'POST',
          `/api/catalog/${op.list}`,
          undefined,
          (status) => (status === 202 ? [listKey(op.list)] : []),
        );
        return;
      case 'fault':
        await this.inject(index, op.fault);
        return;
      case 'heal':
        await this.backend.heal();
        return;
      case 'quiesce':
        await this.quiesce(index);
        this.roundFault = 'none';
        return;
    }
  }

  /** A REST call that may change `possible`; its answer says which keys it did change. */
  private change(
    step: number,
    node: number,
    possible: Key[],
    principal: string,
    method: string,
    route: string,
    body: unknown,
    changed: (status: number) => Key[],
  ): void {
    const record: ChangeRecord = { step, node, keys: possible, invokedAt: performance.now(), definite: false };
    this.changes.push(record);
    this.track(
      api((this.nodes[node] as SampleApp).baseUrl, token(principal), method, route, body).then((answer) => {
        record.answeredAt = performance.now();
        record.keys = changed(answer.status);
        record.definite = true;
      }),
    );
  }

  private async inject(step: number, fault: Fault): Promise<void> {
    const before = await this.gapCount();
    const record: FaultRecord = { step, kind: fault.kind, startAt: performance.now(), gaps: 0 };
    this.faults.push(record);
    this.current = { record, kind: fault.kind, before };
    this.roundFault = `${fault.kind} (step ${step})`;
    this.faultCounts[fault.kind] = (this.faultCounts[fault.kind] ?? 0) + 1;
    await this.backend.inject(fault, this.nodeNames);
  }

  private async stats(): Promise<NodeStats[]> {
    return Promise.all(
      this.nodes.map(async (node) => {
        const answer = await api(node.baseUrl, token('alice'), 'GET', '/api/subscriptions/stats');
        if (answer.status !== 200) throw new Error(`GET /api/subscriptions/stats answered ${answer.status}`);
        return answer.body as NodeStats;
      }),
    );
  }

  /** Outages the nodes have counted so far: `reconnects + resubscribes`, summed. */
  private async gapCount(): Promise<number> {
    const stats = await this.stats();
    return stats.reduce((sum, node) => sum + (node.bus?.reconnects ?? 0) + (node.bus?.resubscribes ?? 0), 0);
  }

  /** What each node must hold on the server now: the channels its open streams follow, and the fixed ones. */
  private expected(): Set<string>[] {
    const fixed = this.backend.fixedChannels();
    const out = this.nodes.map(() => new Set<string>(fixed));
    for (const listener of this.listeners.values()) {
      if (!listener.isOpen) continue;
      const { record } = listener;
      const channels = out[record.node] as Set<string>;
      for (const key of record.honoured ?? []) channels.add(keyChannel(key));
      channels.add(cancelChannel(record.principal));
    }
    return out;
  }

  private async quiesce(step: number): Promise<void> {
    this.quiescences++;
    await within(Promise.allSettled([...this.inflight]), SETTLE_OPS_MS);
    // A listen still unacknowledged now is given up: hung up, so that it holds nothing.
    for (const listener of this.listeners.values()) if (listener.record.ackAt === undefined) listener.close();
    await this.backend.settled();
    const connectedBy = performance.now() + CONNECT_MS;
    let stats = await this.stats();
    while (stats.some((node) => node.bus?.connected !== true) && performance.now() < connectedBy) {
      await sleep(100);
      stats = await this.stats();
    }
    await sleep(LINGER_MS);

    // The probes' notes too (identify()): a channel of theirs still held is a leak to be named.
    const probes = this.nodes.map((_, node) => probeUri(node));
    const universe = [
      ...[...ALL_KEYS, ...probes].map((key) => keyChannel(key)),
      ...PRINCIPALS.map((principal) => cancelChannel(principal)),
      ...this.backend.fixedChannels(),
    ];
    const names = new Map<string, string>([
      ...[...ALL_KEYS, ...probes].map((key) => [keyChannel(key), key] as const),
      ...PRINCIPALS.map((principal) => [cancelChannel(principal), `${principal}'s cancellations`] as const),
      ...this.backend.fixedChannels().map((channel) => [channel, channel] as const),
    ]);
    const deadline = performance.now() + RECOVERY_MS;
    let waiting: Violation[];
    for (;;) {
      stats = await this.stats();
      const open = this.nodes.map(() => 0);
      for (const listener of this.listeners.values()) if (listener.isOpen) open[listener.record.node]!++;
      const held = await this.backend.checkSubscriptions({
        expected: this.expected(),
        universe,
        names,
        nodeNames: this.nodeNames,
        stats: () => this.stats(),
      });
      waiting = [
        ...checkDelivery(this.streams, this.changes, performance.now()),
        ...held,
        ...checkCounters(stats, open),
      ];
      if (waiting.length === 0 || performance.now() > deadline) break;
      await sleep(250);
    }
    if (this.current !== undefined) {
      this.current.record.recoveredAt = performance.now();
      this.current.record.gaps = Math.max(0, (await this.gapCount()) - this.current.before);
      if (this.options.verbose) {
        this.log(`chaos: ${this.current.kind} recovered: ${this.current.record.gaps} outage(s) counted by the buses`);
      }
      this.current = undefined;
    }
    const found = [
      ...waiting,
      ...checkIsolation(this.streams),
      ...checkDuplicates(this.streams, this.changes, this.faults),
    ];
    const leaksAndHoles = new Set<string>();
    for (const violation of found) {
      if (violation.invariant === 3) {
        // Still there since the last check: reported then, under the fault that made it.
        leaksAndHoles.add(violation.id);
        if (this.lastLeaksAndHoles.has(violation.id)) continue;
      } else if (this.reported.has(violation.id)) continue;
      this.reported.add(violation.id);
      const failure: Failure = { ...violation, seed: this.options.seed, step, fault: this.roundFault };
      this.failures.push(failure);
      this.log(formatFailure(failure));
    }
    this.lastLeaksAndHoles = leaksAndHoles;
  }

  report(durationMs: number): ChaosReport {
    return {
      seed: this.options.seed,
      steps: this.options.steps,
      engine: this.options.engine,
      failures: this.failures,
      counts: {
        listens: this.streams.length,
        acknowledged: this.streams.filter((stream) => stream.ackAt !== undefined).length,
        refused: this.streams.filter((stream) => stream.endedBy === 'refused').length,
        notifications: this.streams.reduce((sum, stream) => sum + stream.received.length, 0),
        changes: this.changes.filter((change) => change.keys.length > 0).length,
        faults: this.faultCounts,
        quiescences: this.quiescences,
      },
      durationMs,
    };
  }
}

export function formatFailure(failure: Failure): string {
  return [
    `chaos: FAIL seed ${failure.seed}, step ${failure.step}, invariant ${failure.invariant}, fault ${failure.fault}: ${failure.message}`,
    `  evidence: ${JSON.stringify(failure.evidence)}`,
  ].join('\n');
}
