/**
 * `PostgresBus` against a real PostgreSQL with node-postgres: the bus contract (both routings, both
 * forms, two nodes and one), interest routing across two nodes, cancellations, the spill of a large
 * event, publishIn() on COMMIT and never on ROLLBACK, a listening connection terminated
 * (`pg_terminate_backend`), an exhausted caller pool, and close().
 *
 * Under CI (`CI` set) a PostgreSQL that does not answer fails these suites; elsewhere they report
 * themselves skipped, with the reason. Every test has a channel prefix and a spill table of its own.
 */
import { afterAll } from '@jest/globals';
import pg from 'pg';
import { type SubscriptionBus } from 'mcp-subscriptions';
import { PostgresBus, type PostgresBusOptions } from 'mcp-subscriptions/postgres';
import { describeBusContract } from '../helpers/bus-contract.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { PG_URL, PgAdmin, postgresMissing, uniquePrefix } from '../helpers/postgres.ts';
import { describeUnless, failUnderCi } from '../helpers/skip.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';

const missing = await postgresMissing();
failUnderCi('PostgreSQL for the PostgresBus suites', missing);

const cleanups: (() => unknown)[] = [];
const unhandled = new UnhandledTracker();
unhandled.start();
const admin = missing === undefined ? new PgAdmin() : undefined;
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // already closed
    }
  }
  await admin?.close();
  unhandled.stop();
});

type Form = 'url' | 'pool';
type NodeOptions = Partial<Omit<PostgresBusOptions, 'url' | 'pool'>> & { pool?: pg.Pool };

/** A caller's pool, as a host app makes one (ended after the file). */
function callerPool(config: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 3, ...config });
  pool.on('error', () => {});
  cleanups.push(() => pool.end());
  return pool;
}

/** One node: a PostgresBus on a URL, or on a caller's pool. */
function node(form: Form, channelPrefix: string, options: NodeOptions = {}): PostgresBus {
  const { pool, ...rest } = options;
  const common = { channelPrefix, logger: recordingLogger(), spillTable: admin!.table(), ...rest };
  const bus =
    form === 'url'
      ? new PostgresBus({ url: PG_URL, ...common })
      : new PostgresBus({ pool: pool ?? callerPool(), ...common });
  cleanups.push(() => bus.close());
  return bus;
}

async function connected(...buses: PostgresBus[]): Promise<void> {
  await waitFor(() => buses.every((bus) => bus.stats().connected), 'the buses connected', 10_000);
}

/** A bus whose members join `buses` in turn: members on different nodes, talking through PostgreSQL. */
function spread(buses: readonly PostgresBus[]): SubscriptionBus {
  let next = 0;
  return { join: (listener) => buses[next++ % buses.length]!.join(listener) };
}

function nodes(forms: readonly Form[], routing?: PostgresBusOptions['routing']) {
  return async () => {
    const channelPrefix = uniquePrefix();
    const buses = forms.map((form) => node(form, channelPrefix, routing === undefined ? {} : { routing }));
    await connected(...buses);
    return {
      bus: buses.length === 1 ? buses[0]! : spread(buses),
      close: async () => {
        for (const bus of buses) await bus.close();
      },
    };
  };
}

describeUnless(missing)('PostgresBus against PostgreSQL on 127.0.0.1:5432', () => {
  describeBusContract('PostgresBus (url and pool nodes)', nodes(['url', 'pool']));
  describeBusContract('PostgresBus (pool), one node', nodes(['pool']));
  describeBusContract('PostgresBus (url and pool nodes, routing broadcast)', nodes(['url', 'pool'], 'broadcast'));
});
