/**
 * `mcp-subscriptions/postgres`: `PostgresBus`, the `SubscriptionBus` that joins the hubs of several
 * processes over PostgreSQL's LISTEN/NOTIFY, on node-postgres (`pg` 8), which this package does not
 * depend on: pass your own `Pool`, or a URL and have `pg` loaded. docs/postgres.md says what it
 * guarantees, what it does not, the privileges it needs and how to run it beside a connection pooler.
 */
export { PostgresBus, PostgresBusChannel } from './postgres-bus.ts';
export type { PostgresBusStats, PostgresConnectionMessage } from './postgres-bus.ts';
export type {
  PostgresBusCommonOptions,
  PostgresBusOptions,
  PostgresBusPoolOptions,
  PostgresBusRouting,
  PostgresBusUrlOptions,
  PostgresClientConfig,
  PostgresListenClient,
  PostgresListener,
  PostgresPool,
  PostgresQueryable,
  PostgresQueryResult,
} from './options.ts';
