/**
 * The stuck run's churn: clients connect and disconnect at `--churn-rate` a second (a fifth leave
 * before the acknowledgement, three fifths read for 10 to 300 ms, a fifth stop reading and leave 100 to
 * 300 ms later), each cycle checked for ending the way its client meant, while the healthy readers
 * are measured. Its choices follow `--seed`.
 */
import { performance } from 'node:perf_hooks';
import { prng } from '../../shared/stats.ts';
import { ACK_GUARD_MS, Listen } from '../client.ts';
import { sleep } from '../harness.ts';
import { CHURN_IN_FLIGHT, churnCap, churnMs, churnRate, LOAD_URIS, loadUris, seed } from './options.ts';

const random = prng(seed);
const pick = (n: number): number => Math.floor(random() * n);

type ChurnKind = 'before-ack' | 'reader' | 'stopped';

export interface ChurnTally {
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
    listen.stopReading();
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
export async function churn(port: number, from: number): Promise<ChurnTally> {
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
