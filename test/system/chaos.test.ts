/**
 * Issue 29's chaos test (`npm run chaos`, tools/chaos/) at a small size, so that it never rots and a
 * regression of the bus under faults fails CI: three sample processes over a Redis of their own, a
 * few seeds of random listens, closes, cancels and publishes with faults injected and healed, and the
 * five invariants checked at each quiescence (docs/reliability.md). Single Redis: `kill -9` and
 * restart, `CLIENT KILL` of a node's bus connections, `CLIENT PAUSE`. Cluster (ports 7500–7999): a
 * master's `kill -9` with failover, a slot move. PostgreSQL (a private cluster of the run's own, never
 * the shared 5432): the postmaster's `kill -9`, `pg_terminate_backend()` of a node's listening
 * connection, a node's pool exhausted. The long runs and their figures are in docs/reliability.md.
 */
import { expect } from '@jest/globals';
import { runChaos } from '../helpers/chaos.ts';
import { ownRedisSkipReason } from '../helpers/redis.ts';
import { privatePostgresMissing } from '../../tools/chaos/postgres.ts';
import { failUnderCi, testUnless } from '../helpers/skip.ts';

const serverMissing = ownRedisSkipReason('the chaos test');
failUnderCi('redis-server for the chaos test', serverMissing);
const testWithRedis = testUnless(serverMissing);
const postgresMissing = privatePostgresMissing();
failUnderCi('PostgreSQL 15 binaries for the chaos test', postgresMissing);
const testWithPostgres = testUnless(postgresMissing);

/** Every violation is printed with its seed, step, invariant and evidence: the whole output on failure. */
function expectAllHeld({ code, output }: { code: number | null; output: string }): void {
  expect({ code, output }).toMatchObject({ code: 0 });
  expect(output).toContain('chaos: all invariants held');
}

testWithRedis(
  'single Redis, seeds 1 and 2: kill -9, CLIENT KILL, CLIENT PAUSE; every invariant holds',
  async () => {
    expectAllHeld(await runChaos(['--seed', '1', '--runs', '2', '--steps', '40']));
  },
  150_000,
);

testWithRedis(
  'Redis Cluster, seed 1: a master killed and failed over, a slot moved; every invariant holds',
  async () => {
    expectAllHeld(await runChaos(['--cluster', '--seed', '1', '--steps', '30']));
  },
  150_000,
);

testWithPostgres(
  'PostgreSQL, seed 7: the postmaster killed, a pool exhausted, a listening connection terminated; every invariant holds',
  async () => {
    expectAllHeld(await runChaos(['--postgres', '--seed', '7', '--steps', '40']));
  },
  150_000,
);
