/**
 * The chaos run's schedule: every operation and fault of a run, drawn from the seed alone before
 * anything starts, so that `--seed N` replays the same schedule. Nothing here looks at what a server
 * answered: an operation that names a stream names the listen step that opened it, and is a no-op at
 * run time when that stream has already ended.
 */
import { prng } from '../shared/stats.ts';

/** The sample apps' principals (docs/sample-app.md, identity). */
export const PRINCIPALS = ['alice', 'bob', 'carol'] as const;
export type Principal = (typeof PRINCIPALS)[number];

/**
 * The notes of the key pool: two of alice, two of bob, one of carol and two shared. A small pool, so
 * that streams of different nodes follow the same keys and a change has followers.
 */
export const NOTE_URIS = [
  'note://alice/a1',
  'note://alice/a2',
  'note://bob/b1',
  'note://bob/b2',
  'note://carol/c1',
  'note://shared/s1',
  'note://shared/s2',
] as const;

/** The list kinds, by the name the catalog route and the channel use. */
export const LISTS = ['tools', 'prompts', 'resources'] as const;
export type ListKind = (typeof LISTS)[number];

/** A key a stream can follow: a note URI, or `list:<kind>`. */
export type Key = string;

export function listKey(kind: ListKind): Key {
  return `list:${kind}`;
}

/** Every key of the pool. */
export const ALL_KEYS: readonly Key[] = [...NOTE_URIS, ...LISTS.map(listKey)];

/** The owner of a note URI (`note://<owner>/<name>`). */
export function ownerOf(uri: string): string {
  return uri.slice('note://'.length).split('/')[0] ?? '';
}

/** The contract's read rule: a principal reads its own notes and the shared ones. */
export function canRead(principal: string, uri: string): boolean {
  const owner = ownerOf(uri);
  return owner === principal || owner === 'shared';
}

/** The number of sample processes (nodes) a run drives. */
export const NODES = 3;

/** A fault, as the schedule draws it. */
export type Fault =
  /** `kill -9` of redis-server, restarted on the same port once the heal step comes. */
  | { readonly kind: 'redis-kill' }
  /** `CLIENT KILL` of one node's bus connections (its publisher, its subscriber or both). */
  | { readonly kind: 'client-kill'; readonly node: number; readonly connections: 'pub' | 'sub' | 'both' }
  /** `CLIENT PAUSE ms ALL`: Redis answers nobody for that long. */
  | { readonly kind: 'client-pause'; readonly ms: number }
  /** Cluster: `kill -9` of the master serving the slot of `key`'s channel; healed by its replica's promotion, then restarted as a replica. */
  | { readonly kind: 'master-kill'; readonly key: Key }
  /** Cluster: the slot of `key`'s channel moves to another master (`to` picks one of the two others, in port order). */
  | { readonly kind: 'slot-move'; readonly key: Key; readonly to: number }
  /** PostgreSQL: `kill -9` of the postmaster (a crash: every session and LISTEN gone, the NOTIFY queue lost), started again at the heal step. */
  | { readonly kind: 'pg-kill' }
  /** PostgreSQL: `pg_terminate_backend()` of one node's listening connection. */
  | { readonly kind: 'pg-terminate'; readonly node: number }
  /**
   * PostgreSQL: one node's publishes can get no connection until the heal step: its role limited to the
   * connections it has left (`ALTER ROLE … CONNECTION LIMIT`) once its pool's other backends are
   * terminated, so that every new connection of its pool is refused ("too many connections for role").
   */
  | { readonly kind: 'pg-exhaust'; readonly node: number };

export type FaultKind = Fault['kind'];

/** One operation of the schedule. */
export type Op =
  | {
      readonly type: 'listen';
      readonly node: number;
      readonly principal: Principal;
      readonly lists: readonly ListKind[];
      /** Any notes of the pool, others' too: the server must leave those out of the acknowledgement. */
      readonly uris: readonly string[];
    }
  /** The client hangs up the stream that listen step `listen` opened. */
  | { readonly type: 'close'; readonly listen: number }
  /** POST `notifications/cancelled` for that stream, to `node` (not necessarily the one holding it). */
  | { readonly type: 'cancel'; readonly listen: number; readonly node: number }
  /** `PUT /api/notes/...` as `principal` (a non-owner now and then: 403, nothing changes). */
  | { readonly type: 'put'; readonly node: number; readonly principal: Principal; readonly uri: string }
  | { readonly type: 'delete'; readonly node: number; readonly principal: Principal; readonly uri: string }
  /** `POST /api/catalog/<list>`. */
  | { readonly type: 'catalog'; readonly node: number; readonly principal: Principal; readonly list: ListKind }
  | { readonly type: 'fault'; readonly fault: Fault }
  /** The current fault ends (Redis restarted, the failover or the slot move awaited). */
  | { readonly type: 'heal' }
  /** Every fault healed: wait for recovery, then check the invariants. */
  | { readonly type: 'quiesce' };

/** One step: wait `delayMs` after the previous step was launched, then launch `op`. */
export interface Step {
  readonly index: number;
  readonly delayMs: number;
  readonly op: Op;
}

/** The bus engine a run drives: one Redis server, a Redis Cluster, or PostgreSQL. */
export type Engine = 'redis' | 'cluster' | 'postgres';

export interface ScheduleOptions {
  readonly seed: number;
  /** How many client operations (listen, close, cancel, publish); faults and checks come on top. */
  readonly steps: number;
  /** Whose faults: the single server's, the cluster's (failover, slot move) or PostgreSQL's. */
  readonly engine: Engine;
}

/** Open streams the schedule allows before it closes rather than opens (a per-principal limit is far off). */
const MAX_OPEN = 30;

/** The schedule of a run: rounds of operations, each with one fault healed before its quiescence. */
export function schedule({ seed, steps, engine }: ScheduleOptions): Step[] {
  const random = prng(seed);
  const int = (n: number): number => Math.floor(random() * n);
  const between = (low: number, high: number): number => low + int(high - low + 1);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const out: Step[] = [];
  /** Listen steps whose stream the schedule has not closed or cancelled yet. */
  const open: number[] = [];
  let ops = 0;

  const push = (op: Op, delayMs = between(0, 30)): void => {
    out.push({ index: out.length, delayMs, op });
  };

  const clientOp = (): void => {
    ops++;
    // Now and then a longer pause, so that some operations meet a settled bus and some a busy one.
    const delayMs = random() < 0.1 ? between(100, 300) : between(0, 30);
    let roll = random();
    if (open.length === 0 && roll >= 0.3 && roll < 0.5) roll = 0; // nothing to close: open one
    if (open.length >= MAX_OPEN && roll < 0.3) roll = 0.35; // enough open: close one
    if (roll < 0.3) {
      const principal = pick(PRINCIPALS);
      const lists = LISTS.filter(() => random() < 0.35);
      const uris = NOTE_URIS.filter(() => random() < 0.25);
      open.push(out.length);
      push({ type: 'listen', node: int(NODES), principal, lists, uris }, delayMs);
    } else if (roll < 0.42) {
      const listen = open.splice(int(open.length), 1)[0] as number;
      push({ type: 'close', listen }, delayMs);
    } else if (roll < 0.5) {
      const listen = open.splice(int(open.length), 1)[0] as number;
      push({ type: 'cancel', listen, node: int(NODES) }, delayMs);
    } else if (roll < 0.88) {
      const uri = pick(NOTE_URIS);
      const owner = ownerOf(uri);
      // The owner (anyone for shared notes), and one time in ten a principal that may not write it.
      let principal: Principal = owner === 'shared' ? pick(PRINCIPALS) : (owner as Principal);
      if (random() < 0.1) principal = pick(PRINCIPALS);
      const type = random() < 0.2 ? 'delete' : 'put';
      push({ type, node: int(NODES), principal, uri }, delayMs);
    } else {
      push({ type: 'catalog', node: int(NODES), principal: pick(PRINCIPALS), list: pick(LISTS) }, delayMs);
    }
  };

  const fault = (): Fault => {
    if (engine === 'postgres') {
      const roll = random();
      if (roll < 0.35) return { kind: 'pg-kill' };
      if (roll < 0.7) return { kind: 'pg-terminate', node: int(NODES) };
      return { kind: 'pg-exhaust', node: int(NODES) };
    }
    if (engine === 'cluster') {
      return random() < 0.5
        ? { kind: 'master-kill', key: pick(ALL_KEYS) }
        : { kind: 'slot-move', key: pick(ALL_KEYS), to: int(2) };
    }
    const roll = random();
    if (roll < 0.35) return { kind: 'redis-kill' };
    if (roll < 0.7)
      return { kind: 'client-kill', node: int(NODES), connections: pick(['pub', 'sub', 'both'] as const) };
    return { kind: 'client-pause', ms: between(300, 1500) };
  };

  while (ops < steps) {
    for (let n = between(3, 8); n > 0 && ops < steps; n--) clientOp();
    const drawn = fault();
    push({ type: 'fault', fault: drawn });
    for (let n = between(3, 10); n > 0 && ops < steps; n--) clientOp();
    // An outage of a second or so at least, so that it is one: the operations above take less.
    const outage = drawn.kind === 'redis-kill' || drawn.kind === 'pg-kill' || drawn.kind === 'pg-exhaust';
    push({ type: 'heal' }, outage ? between(200, 1500) : 0);
    // Straight after the heal, while the bus subscribes again: the race of a listen with that round.
    for (let n = between(2, 8); n > 0 && ops < steps; n--) clientOp();
    push({ type: 'quiesce' }, 0);
  }
  return out;
}

/** One line per step, for `--print-schedule` and for comparing two draws of a seed. */
export function describeStep(step: Step): string {
  const { op } = step;
  const head = `#${step.index} +${step.delayMs}ms`;
  switch (op.type) {
    case 'listen':
      return `${head} listen n${op.node} ${op.principal} lists=[${op.lists.join(',')}] uris=[${op.uris.join(',')}]`;
    case 'close':
      return `${head} close #${op.listen}`;
    case 'cancel':
      return `${head} cancel #${op.listen} via n${op.node}`;
    case 'put':
    case 'delete':
      return `${head} ${op.type} n${op.node} ${op.principal} ${op.uri}`;
    case 'catalog':
      return `${head} catalog n${op.node} ${op.principal} ${op.list}`;
    case 'fault':
      return `${head} fault ${JSON.stringify(op.fault)}`;
    case 'heal':
    case 'quiesce':
      return `${head} ${op.type}`;
  }
}
