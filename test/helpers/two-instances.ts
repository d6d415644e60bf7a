/**
 * Two instances of a sample app joined over one Redis (`REDIS_URL`) or one PostgreSQL database
 * (`DATABASE_URL`), and the warm-up that makes them safe to test: for the contract suite's REDIS_URL
 * rows, the Redis fault suite and the samples' PostgreSQL suite.
 */
import { expect } from '@jest/globals';
import type { ListenSubscription } from 'mcp-subscriptions/client';
import { putNote, startSample, TOKENS, type SampleApp, type SampleKind } from './sample-app.ts';
import { isUpdateOf, type Subscribe } from './sentinel.ts';
import { uid } from './uid.ts';

/**
 * The variable that puts a sample on the bus at `url`: `DATABASE_URL` for a `postgres:` or
 * `postgresql:` URL, `REDIS_URL` for any other.
 */
export function busEnv(url: string): Record<string, string> {
  return /^postgres(ql)?:/i.test(url) ? { DATABASE_URL: url } : { REDIS_URL: url };
}

/**
 * Two instances of `kind` sharing the Redis or the PostgreSQL database at `url` ({@link busEnv}), each
 * with its own of `envs` added to its environment (a METRICS_PORT of its own, say). When either fails
 * to start, the other is stopped with `signal` (SIGTERM by default; a fault suite that kills anyway says
 * SIGKILL) and the failure thrown.
 */
export async function twoInstances(
  kind: SampleKind,
  url: string,
  signal: NodeJS.Signals = 'SIGTERM',
  envs: readonly [Record<string, string>, Record<string, string>] = [{}, {}],
): Promise<[SampleApp, SampleApp]> {
  const started = await Promise.allSettled(envs.map((env) => startSample(kind, { ...env, ...busEnv(url) })));
  const failed = started.find((result) => result.status === 'rejected');
  if (failed !== undefined) {
    for (const result of started) if (result.status === 'fulfilled') await result.value.stop(signal);
    throw failed.reason;
  }
  return started.map((result) => (result as PromiseFulfilledResult<SampleApp>).value) as [SampleApp, SampleApp];
}

/**
 * Waits until both instances deliver each other's events, and until nothing published before this call
 * is still on its way: probes on both instances follow a note of their own, which is then created on
 * `a` and on `b` (one event per instance). Redis keeps one publisher's messages in order, and PostgreSQL
 * delivers notifications in commit order, so once each probe has both creations, everything `a` and `b` published earlier (a sentinel's own creation
 * included) has been delivered, and cannot arrive late on a stream opened afterwards. (Counting the
 * sentinel's events instead would not do: its creation on the other instance may still be in flight
 * and be counted in place of a later firing, which then lands on the stream under test.) A home-grown
 * variant of this probe was flaky under CI load: change it only with a reason.
 *
 * The probes, opened with `subscribe`, are returned and stay open: closing one would leave Node's
 * fetch a spare connection (nodejs/undici#5845) that the instance's shutdown would wait for. The suite
 * ends them as it ends its other subscriptions, or the instance does when it stops (or dies).
 */
export async function warm(a: SampleApp, b: SampleApp, subscribe: Subscribe): Promise<ListenSubscription[]> {
  const uri = `note://shared/${uid('warm')}`;
  const probes = await Promise.all(
    [a, b].map((instance) => subscribe(instance, TOKENS.carol, uid('warm'), { resourceSubscriptions: [uri] })),
  );
  for (const instance of [a, b]) expect((await putNote(instance, TOKENS.carol, uri, 'warm')).status).toBe(201);
  for (const probe of probes) {
    let updates = 0;
    // The warm-up note created on both instances.
    await probe.waitFor((n) => isUpdateOf(uri)(n) && ++updates === 2, { timeoutMs: 5000 });
  }
  return probes;
}
