/**
 * What a benchmark scenario is: its name and title, its settings (full and `--quick` sizes), the
 * servers it runs against, the rows the table shows of its figures (with their targets), and the load
 * it drives. Each lives in a file of its own under `scenarios/`; `scenarios/index.ts` lists them in
 * the order the bench runs them.
 */

/**
 * The servers. `ceiling-express` is the ceiling mounted in Express (idle and open only: what the
 * framework costs); `ours-fastify` is the host app on Fastify with the Fastify plugin, and
 * `ceiling-fastify` the ceiling mounted in Fastify beside it (idle, open, fan-out and tick);
 * `ours-metrics` is ours with an OpenTelemetry `MeterProvider` registered before its hub is built, which
 * the orchestrator scrapes as Prometheus would (fan-out and open: what metrics on cost).
 */
export type Target =
  'ours' | 'sdk' | 'ceiling' | 'ceiling-express' | 'ours-fastify' | 'ceiling-fastify' | 'ours-metrics';
/** One target's figures: numbers (NaN where not applicable), booleans, or short strings. */
export type Figures = Record<string, number | boolean | string>;
export type ScenarioResult = Partial<Record<Target, Figures>>;
/** Each server's port. */
export type Ports = Record<Target, number>;

/**
 * The ports of node A and node B: two `ours` processes joined by a `RedisBus` on one Redis; with
 * `postgresNodes`, also node C and node D, two more joined by a `PostgresBus` on the bench's own
 * PostgreSQL.
 */
export interface Nodes {
  readonly a: number;
  readonly b: number;
  readonly c?: number;
  readonly d?: number;
}

/** A PostgreSQL server of the bench's own (a private cluster, durable as a production one): where, and its postmaster. */
export interface BenchPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/test`. */
  readonly url: string;
  /** The postmaster's pid: the server's CPU is read from /proc (bench/lib/postgres.ts). */
  readonly pid: number;
}

/**
 * One routing mode's fleet, for the fleet scenario: the nodes' ports (spread over two or more
 * processes; `processes[i]` lists the indexes into `ports` that process `i` hosts), the Redis they share
 * (the bench's own, on `redisPort`), and the `RedisBus` routing they run.
 */
export interface Fleet {
  readonly ports: readonly number[];
  readonly processes: readonly (readonly number[])[];
  readonly redisPort: number;
  /**
   * `'interest'`, `'broadcast'` or `'buckets:N'` (a `RedisBus`), or `'pg:interest'` or `'pg:broadcast'`
   * (a `PostgresBus` on {@link postgres}), as the nodes were started with.
   */
  readonly routing: string;
  /** The bench's PostgreSQL, for the `pg:` routings. */
  readonly postgres?: BenchPostgres;
}

/** The table's columns. */
export const TARGETS: readonly Target[] = ['ours', 'sdk', 'ceiling'];
/**
 * Ours on Fastify and the ceiling mounted in Fastify. They have no columns of their own: their rows put
 * them in the ours and ceiling columns (`scenarios/rows.ts`).
 */
export const FASTIFY: readonly Target[] = ['ours-fastify', 'ceiling-fastify'];
/** The columns plus Fastify's two, for the delivery scenarios (fan-out, tick). */
export const WITH_FASTIFY: readonly Target[] = [...TARGETS, ...FASTIFY];
/**
 * The columns plus the ceiling mounted in Express and Fastify's two, for the scenarios whose figures the
 * framework weighs on (idle, open).
 */
export const WITH_FRAMEWORK: readonly Target[] = [...TARGETS, 'ceiling-express', ...FASTIFY];

/** `targets` with ours with metrics beside ours, for the scenarios with metrics rows (fan-out, open). */
export function withMetrics(targets: readonly Target[]): readonly Target[] {
  return targets.flatMap((t): Target[] => (t === 'ours' ? ['ours', 'ours-metrics'] : [t]));
}

/**
 * `targets` as the turns of a scenario that runs servers one after the other: ours and ours with metrics
 * share one (their rounds alternate), every other server has its own, in the order of `targets`.
 */
export function inTurns(targets: readonly Target[]): Target[][] {
  const paired = targets.includes('ours') && targets.includes('ours-metrics');
  return targets.flatMap((t): Target[][] => {
    if (paired && t === 'ours-metrics') return [];
    return [paired && t === 'ours' ? ['ours', 'ours-metrics'] : [t]];
  });
}

/** One row of the table. */
export interface RowSpec {
  readonly label: string;
  readonly unit: string;
  /** Read the figure for one target from its results (default: `figures[key]`). */
  readonly key?: string;
  readonly value?: (figures: Figures, all: ScenarioResult) => number | boolean | string | undefined;
  /** Targets the figure applies to; the others show `n/a`. */
  readonly only?: readonly Target[];
  readonly digits?: number;
  readonly target?: string;
  /** Whether the target is met, from every target's value of this row. */
  readonly met?: (
    values: Partial<Record<Target, number | boolean | string | undefined>>,
    all: ScenarioResult,
  ) => boolean | undefined;
  /** A note for the reader (e.g. what the SDK does not do). */
  readonly note?: string;
}

/** A scenario, with its settings `P` (printed and stored in the results as they are). */
export interface Scenario<P = any> {
  /** What `--only` takes, and the key of its results. */
  readonly name: string;
  readonly title: string;
  readonly full: P;
  readonly quick: P;
  /** Which servers it runs against. */
  readonly targets: readonly Target[];
  /**
   * Also run node A and node B: two `ours` joined by a `RedisBus` on one Redis. Without a Redis that
   * answers, the scenario is skipped with the reason (a failure under CI).
   */
  readonly redisNodes?: boolean;
  /**
   * With `redisNodes`: also node C and node D, two `ours` joined by a `PostgresBus` on a PostgreSQL of
   * the bench's own. Skipped with the reason where PostgreSQL's binaries are missing (a failure under CI).
   */
  readonly postgresNodes?: boolean;
  /**
   * The load gets a PostgreSQL of the bench's own (`postgres` of `run`), and no server of ours: a
   * measure of PostgreSQL itself (NOTIFY's ceiling).
   */
  readonly postgresServer?: boolean;
  /**
   * Run against fleets of nodes on a Redis server of the bench's own, one fleet per routing mode
   * (`fleet.routings(params)`), each in processes of its own; the load runs once per mode (timeout
   * each), and the scenario's `merge` makes one result of the modes' figures. Skipped, with the
   * reason, when `redis-server` cannot be started (a failure under CI).
   */
  readonly fleet?: {
    readonly routings: (params: P) => readonly string[];
    readonly nodes: (params: P) => number;
    readonly processes: number;
    readonly merge: (byRouting: Record<string, Figures>) => ScenarioResult;
  };
  readonly timeoutMs: number;
  readonly rows: (params: P) => RowSpec[];
  /** Drives the load, in the load generator's process (load.ts), and returns each target's figures. */
  readonly run: (
    ports: Ports,
    targets: readonly Target[],
    params: P,
    nodes: Nodes | undefined,
    fleet?: Fleet,
    postgres?: BenchPostgres,
  ) => Promise<ScenarioResult>;
}
