/**
 * The options of `new PostgresBus()`: their types, defaults and checks. A mistake throws an
 * `OptionsError` with the code of its check when the bus is built, never at the first publish.
 */
import { randomUUID } from 'node:crypto';
import {
  booleanOption,
  consoleLogger,
  describeValue,
  durationMs,
  ErrorCode,
  given,
  knownKeys,
  loggerOption,
  MAX_NODE_ID_LENGTH,
  optionKeys,
  OptionsError,
  optionsObject,
  type Logger,
} from '../../lib/internal.ts';
import { MAX_CHANNEL_PREFIX_BYTES } from './channels.ts';

/** A query's result, as far as the bus reads it. */
export interface PostgresQueryResult {
  readonly rows: readonly unknown[];
}

/**
 * Anything that runs a query: a node-postgres `Pool`, `Client` or `PoolClient` (the client of your
 * transaction, for {@link PostgresBus.publishIn}). Only what the bus calls is typed, so that the
 * package needs none of pg's types.
 */
export interface PostgresQueryable {
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>;
}

/** A node-postgres `Pool` (`new Pool(config)` of `pg` 8), as far as the bus relies on its shape. */
export interface PostgresPool extends PostgresQueryable {
  connect(): Promise<unknown>;
  /** What tells a pool from a client. */
  readonly totalCount: number;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * The dedicated connection the bus LISTENs on: a node-postgres `Client`, not connected yet (the bus
 * connects it, and ends it in `close()` or when it is lost).
 */
export interface PostgresListenClient {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  removeAllListeners(event?: string): unknown;
  end(): Promise<unknown>;
}

/**
 * Where the listening client connects: the settings of a node-postgres `Client` (`pg.ClientConfig`),
 * typed here only as far as the bus's checks go.
 */
export interface PostgresClientConfig {
  readonly connectionString?: string;
  readonly host?: string;
  readonly port?: number;
  readonly user?: string;
  readonly database?: string;
}

/**
 * How the bus makes its listening client: a function that returns a new, unconnected `Client` each
 * time it is called (once at start, once per reconnection: a node-postgres client cannot connect twice),
 * or the settings of one (`{ connectionString }`, as `new Client()` takes them).
 */
export type PostgresListener = (() => PostgresListenClient) | PostgresClientConfig;

/** How events travel between nodes: see {@link PostgresBusCommonOptions.routing}. */
export type PostgresBusRouting = 'interest' | 'broadcast';

/** Options every form takes. */
export interface PostgresBusCommonOptions {
  /**
   * Starts the name of every channel the bus uses (`${channelPrefix}:2:…`). Apps (or tenants, or test
   * runs) that share one database and must not see each other's events use different prefixes. A
   * non-empty string of at most 36 bytes (UTF-8), so that every channel name fits PostgreSQL's 63-byte
   * identifiers; no NUL. Channel names are quoted, so case and punctuation are kept as they are.
   * @default 'mcp-subscriptions'
   */
  readonly channelPrefix?: string;
  /**
   * This node's identity on the bus: each message carries it, and a node ignores its own. It must be
   * unique among the buses that share a channel prefix. A non-empty string of at most 200 characters.
   * @default a random UUID
   */
  readonly nodeId?: string;
  /**
   * How events travel between nodes (see docs/postgres.md):
   * - `'interest'`: a channel per followed key (a resource URI, a task id, a list kind, a principal's
   *   cancellations), LISTENed by a node while one of its streams follows that key: a node receives
   *   only what its own streams follow.
   * - `'broadcast'`: one channel that every node hears: cheapest when every node follows most keys anyway.
   * Every node sharing a `channelPrefix` must use the same routing.
   * @default 'interest'
   */
  readonly routing?: PostgresBusRouting;
  /**
   * Whether nothing goes unnoticed (docs/postgres.md): after a gap (the listening connection lost, a
   * LISTEN not answered in time) this node's streams are told once per key they follow that it may have
   * changed, and the changes this node could not publish are published once PostgreSQL is back.
   * `false`: pure at-most-once.
   * @default true
   */
  readonly resync?: boolean;
  /**
   * The table where a message too large for a NOTIFY payload (8,000 bytes) waits for its readers: `name`
   * or `schema.name`, plain identifiers (letters, digits, `_`, `$`; not starting with a digit; at most 63
   * bytes each), as they are (quoted, so case is kept). Created on first use when missing (`CREATE TABLE
   * IF NOT EXISTS`), or by the migration in docs/postgres.md. `false`: no spill; a larger event reaches
   * this node's streams only, and is reported once.
   * @default 'mcp_subscriptions_spill'
   */
  readonly spillTable?: string | false;
  /**
   * How long a spilled message stays in {@link spillTable}, in milliseconds from its INSERT: its readers
   * read it within milliseconds of the notification; a node that spills deletes the rows older than
   * this, at most once per this interval. Keep it longer than your longest transaction that calls
   * `publishIn()` with a large event (its row is stamped when inserted, its notification goes out at COMMIT).
   * @default 60000
   */
  readonly spillTtlMs?: number;
  /**
   * Makes the listening client (the one connection that LISTENs, which PgBouncer in transaction mode
   * cannot serve): a function returning a new unconnected `pg.Client` on each call, or a `Client`'s
   * settings (`{ connectionString }`).
   * @default a client with the settings of `url`, or of the `pool`'s options
   */
  readonly listener?: PostgresListener;
  /**
   * Where an outage (once per outage), a message refused on receipt (the first one) and similar runtime
   * failures are reported.
   * @default console, prefixed `[mcp-subscriptions]`
   */
  readonly logger?: Logger;
}

/**
 * A URL: the bus creates and owns a small `Pool` (for NOTIFY and spill reads) and its listening client,
 * and ends both in `close()`. `pg` is loaded with a dynamic `import()`, so the constructor cannot know
 * whether it is installed: a missing one is reported through `logger.error` (an `OptionsError` with code
 * `ERR_MCP_SUBSCRIPTIONS_POSTGRES_CLIENT_MISSING`) right after construction, and the bus stays disconnected.
 */
export interface PostgresBusUrlOptions extends PostgresBusCommonOptions {
  /** `postgres://user[:password]@host[:port]/database` or `postgresql://…`. Required in this form. */
  readonly url: string;
  readonly pool?: never;
}

/**
 * Your `Pool`: the bus NOTIFYs and reads spilled messages through it and never ends it. Its listening
 * client is its own (made with the pool's `Client` and options, unless `listener` says otherwise), and
 * ended in `close()`.
 */
export interface PostgresBusPoolOptions extends PostgresBusCommonOptions {
  /** A node-postgres `Pool`. Required in this form. */
  readonly pool: PostgresPool;
  readonly url?: never;
}

/** Options of `new PostgresBus(options)`: a URL or your pool. Unknown keys are refused. */
export type PostgresBusOptions = PostgresBusUrlOptions | PostgresBusPoolOptions;

/** Every key of either form, checked against the interfaces by the compiler. */
export const POSTGRES_BUS_OPTION_KEYS = optionKeys<{
  [K in keyof PostgresBusUrlOptions | keyof PostgresBusPoolOptions]: unknown;
}>({
  url: true,
  pool: true,
  listener: true,
  channelPrefix: true,
  nodeId: true,
  routing: true,
  resync: true,
  spillTable: true,
  spillTtlMs: true,
  logger: true,
});

/** The spill table's name, checked: its parts, and the SQL that names it. */
export interface SpillTableName {
  /** As given: `name` or `schema.name`. */
  readonly name: string;
  /** Quoted for SQL: `"name"` or `"schema"."name"`. */
  readonly sql: string;
}

/** The options after defaults and validation. */
export interface ResolvedPostgresBusOptions {
  readonly connections:
    { readonly form: 'url'; readonly url: string } | { readonly form: 'pool'; readonly pool: PostgresPool };
  readonly listener: PostgresListener | undefined;
  readonly channelPrefix: string;
  readonly nodeId: string;
  readonly routing: PostgresBusRouting;
  readonly resync: boolean;
  readonly spillTable: SpillTableName | false;
  readonly spillTtlMs: number;
  readonly logger: Logger;
}

const WHERE = 'new PostgresBus()';

/** The longest identifier PostgreSQL keeps, in bytes (NAMEDATALEN - 1). */
export const MAX_IDENTIFIER_BYTES = 63;

/** An unquoted-style identifier: what a table name may be made of here. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_$]*$/;

type Loose = Record<string, unknown>;

const isFunction = (value: unknown): boolean => typeof value === 'function';

/** Quotes an identifier for SQL (a channel in LISTEN, a table): `"…"`, with `"` doubled. */
export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function postgresUrl(value: unknown): string {
  let protocol: string | undefined;
  if (typeof value === 'string') {
    try {
      protocol = new URL(value).protocol;
    } catch {
      protocol = undefined;
    }
  }
  if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
    throw new OptionsError(
      ErrorCode.InvalidPostgresUrl,
      // The URL is not quoted: it may carry a password.
      `Expected \`url\` to be a postgres:// or postgresql:// URL, got ${typeof value === 'string' ? 'another string' : describeValue(value)}`,
    );
  }
  return value as string;
}

function poolOption(value: unknown, listener: unknown): PostgresPool {
  const pool = value as Loose | null;
  const looksLikePool =
    typeof pool === 'object' &&
    pool !== null &&
    isFunction(pool.query) &&
    isFunction(pool.connect) &&
    isFunction(pool.on) &&
    typeof pool.totalCount === 'number';
  if (!looksLikePool) {
    throw new OptionsError(
      ErrorCode.InvalidPostgresClient,
      `Expected \`pool\` to be a node-postgres Pool (\`new Pool(config)\`), got ${describeValue(value)}`,
    );
  }
  if (
    listener === undefined &&
    !(isFunction(pool.Client) && typeof pool.options === 'object' && pool.options !== null)
  ) {
    throw new OptionsError(
      ErrorCode.InvalidPostgresClient,
      'Expected `pool` to have the `Client` and `options` of a node-postgres Pool to make the listening client from, or a `listener`',
    );
  }
  return value as PostgresPool;
}

function listenerOption(value: unknown): PostgresListener | undefined {
  if (value === undefined || isFunction(value)) return value as PostgresListener | undefined;
  const config = value as Loose | null;
  if (typeof config === 'object' && config !== null && !Array.isArray(config)) {
    // A Client instance would connect once, and could not be connected again after a loss.
    if (isFunction(config.connect) || isFunction(config.query)) {
      throw new OptionsError(
        ErrorCode.InvalidPostgresClient,
        'Expected `listener` to be a function returning a new `Client` (a client cannot connect again once lost: `() => new Client(config)`) or a client configuration, got a client',
      );
    }
    return value as PostgresClientConfig;
  }
  throw new OptionsError(
    ErrorCode.InvalidPostgresClient,
    `Expected \`listener\` to be a function returning a new \`Client\` or a client configuration (\`{ connectionString }\`), got ${describeValue(value)}`,
  );
}

function spillTableOption(value: unknown): SpillTableName | false {
  if (value === false) return false;
  const parts = typeof value === 'string' ? value.split('.') : [];
  const valid =
    parts.length >= 1 &&
    parts.length <= 2 &&
    parts.every((part) => IDENTIFIER.test(part) && Buffer.byteLength(part) <= MAX_IDENTIFIER_BYTES);
  if (!valid) {
    throw new OptionsError(
      ErrorCode.InvalidSpillTable,
      `Expected \`spillTable\` to be \`false\` or a table name (\`name\` or \`schema.name\`: letters, digits, \`_\` and \`$\`, not starting with a digit, at most ${MAX_IDENTIFIER_BYTES} bytes each), got ${describeValue(value)}`,
    );
  }
  return Object.freeze({ name: value as string, sql: parts.map(quoteIdentifier).join('.') });
}

function channelPrefixOption(value: unknown): string {
  if (typeof value !== 'string' || value === '' || value.includes('\0')) {
    throw new OptionsError(
      ErrorCode.InvalidChannelPrefix,
      `Expected \`channelPrefix\` to be a non-empty string without NUL, got ${describeValue(value)}`,
    );
  }
  const bytes = Buffer.byteLength(value);
  if (bytes > MAX_CHANNEL_PREFIX_BYTES) {
    throw new OptionsError(
      ErrorCode.InvalidChannelPrefix,
      `Expected \`channelPrefix\` to be at most ${MAX_CHANNEL_PREFIX_BYTES} bytes (UTF-8), so that every channel name fits PostgreSQL's ${MAX_IDENTIFIER_BYTES}-byte identifiers, got ${bytes} bytes`,
    );
  }
  return value;
}

function routingOption(value: unknown): PostgresBusRouting {
  if (value === undefined || value === 'interest') return 'interest';
  if (value === 'broadcast') return 'broadcast';
  throw new OptionsError(
    ErrorCode.InvalidRouting,
    `Expected \`routing\` to be 'interest' or 'broadcast', got ${describeValue(value)}`,
  );
}

/**
 * Applies defaults to the bus's options and validates them; never mutates its input. Unknown keys are
 * refused, with the nearest known one suggested.
 */
export function resolvePostgresBusOptions(options: PostgresBusOptions): ResolvedPostgresBusOptions {
  optionsObject(options);
  knownKeys(options, POSTGRES_BUS_OPTION_KEYS, WHERE);
  const loose = options as unknown as Loose;

  const listener = listenerOption(loose.listener);
  let connections: ResolvedPostgresBusOptions['connections'];
  if (loose.url !== undefined && loose.pool !== undefined) {
    throw new OptionsError(
      ErrorCode.ConflictingOptions,
      'Expected either `url` (the bus owns its pool) or `pool` (yours), not both',
    );
  } else if (loose.url !== undefined) {
    connections = { form: 'url', url: postgresUrl(loose.url) };
  } else if (loose.pool !== undefined) {
    connections = { form: 'pool', pool: poolOption(loose.pool, listener) };
  } else {
    throw new OptionsError(
      ErrorCode.MissingOption,
      'Expected `url` (a postgres:// URL: the bus owns its pool) or `pool` (your node-postgres Pool)',
    );
  }

  const channelPrefix = channelPrefixOption(given<unknown>(loose.channelPrefix, 'mcp-subscriptions'));
  const nodeId = loose.nodeId === undefined ? randomUUID() : loose.nodeId;
  if (typeof nodeId !== 'string' || nodeId === '' || nodeId.length > MAX_NODE_ID_LENGTH) {
    throw new OptionsError(
      ErrorCode.InvalidNodeId,
      `Expected \`nodeId\` to be a non-empty string of at most ${MAX_NODE_ID_LENGTH} characters, got ${describeValue(nodeId)}`,
    );
  }
  const routing = routingOption(loose.routing);
  const resync = booleanOption('resync', given<unknown>(loose.resync, true));
  const spillTable = spillTableOption(given<unknown>(loose.spillTable, 'mcp_subscriptions_spill'));
  const spillTtlMs = durationMs('spillTtlMs', given<unknown>(loose.spillTtlMs, 60_000));
  const logger = loggerOption('logger', given<unknown>(loose.logger, consoleLogger));
  return Object.freeze({
    connections,
    listener,
    channelPrefix,
    nodeId,
    routing,
    resync,
    spillTable,
    spillTtlMs,
    logger,
  });
}
