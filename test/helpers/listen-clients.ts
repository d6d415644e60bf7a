/**
 * The black-box sample suites' listen clients (the contract suite, the rolling-upgrade suite, the
 * sample-cluster suite): the notification methods they read, the samples' channel prefix, the
 * subscriptions a test opens with the package's listen client (ended after it), and the checks they
 * share on instances joined over Redis.
 */
import { expect } from '@jest/globals';
import { listen, type ListenSubscription } from 'mcp-subscriptions/client';
import { bearer } from './bearer.ts';
import { eventually, postCancel, putNote, TOKENS, type SampleApp } from './sample-app.ts';
import { isUpdateOf, type Sentinel, type Subscribe, type WatchOpener } from './sentinel.ts';
import { uid } from './uid.ts';

export const ACK = 'notifications/subscriptions/acknowledged';
export const TOOLS = 'notifications/tools/list_changed';
export const PROMPTS = 'notifications/prompts/list_changed';
export const RESOURCES = 'notifications/resources/list_changed';
export const UPDATED = 'notifications/resources/updated';
export const TASK = 'notifications/tasks';

/** The samples' channel prefix (sample-app/shared/bus.ts, the same in the first release). */
export const SAMPLE_PREFIX = 'mcp-subscriptions-sample';

/** A suite's listen client: `subscribe` opens and keeps a subscription, `endAll` ends those kept. */
export interface ListenClients {
  readonly subscribe: Subscribe;
  /** Ends every subscription opened since the last call. */
  readonly endAll: () => Promise<void>;
}

/**
 * Opens subscriptions with the package's listen client, with a buffer of `maxBuffer`, and keeps them to
 * be ended after the test. With `end: 'close'` (the default) the client closes each. With
 * `end: 'cancel'`, a principal's subscription still open is first cancelled by the server (its
 * `notifications/cancelled`) rather than aborted by the client: a stream the client aborts leaves Node's
 * fetch a spare connection (nodejs/undici#5845) that the sample's graceful shutdown would wait for.
 */
export function listenClients({
  maxBuffer,
  end = 'close',
}: {
  maxBuffer: number;
  end?: 'close' | 'cancel';
}): ListenClients {
  const kept: { subscription: ListenSubscription; cancel: (() => Promise<Response>) | undefined }[] = [];
  return {
    async subscribe(app, token, id, filter) {
      const subscription = await listen(app.url, filter, { headers: bearer(token), id, maxBuffer });
      const cancel = end === 'cancel' && token !== undefined ? () => postCancel(app, token, id) : undefined;
      kept.push({ subscription, cancel });
      return subscription;
    },
    endAll: async () => {
      await Promise.all(
        kept.splice(0).map(async ({ subscription, cancel }) => {
          if (subscription.endReason === undefined && cancel !== undefined) {
            try {
              await (await cancel()).text();
              await Promise.race([subscription.ended, new Promise((resolve) => setTimeout(resolve, 2000))]);
            } catch {
              // The instance is gone: close() below is all there is to do.
            }
          }
          await subscription.close();
        }),
      );
    },
  };
}

/**
 * A `notifications/cancelled` crossing instances: alice's stream held on `holder`, cancelled through
 * `other`, ends there without a result. With `othersFirst`, bob first names her id on `other` and her
 * stream goes on, which the sentinel fired through `othersFirst.fireVia` shows.
 */
export async function expectCancelAcross(
  watch: WatchOpener,
  sentinel: Sentinel,
  holder: SampleApp,
  other: SampleApp,
  { id = uid('cross-cancel'), othersFirst }: { id?: string; othersFirst?: { fireVia: SampleApp } } = {},
): Promise<void> {
  const held = await watch(holder, sentinel, TOKENS.alice, id, { toolsListChanged: true });
  if (othersFirst !== undefined) {
    // Bob names alice's id on the other instance: her stream goes on.
    await (await postCancel(other, TOKENS.bob, id)).text();
    await sentinel.fire(othersFirst.fireVia);
    expect(await held.next()).toStrictEqual([]);
  }
  // Alice's own cancel, received by the instance that does not hold her stream, ends it there.
  const res = await postCancel(other, TOKENS.alice, id);
  expect(res.status).toBe(202);
  expect(await held.subscription.ended).toBe('lost'); // a cancelled stream gets no result
}

/**
 * Waits until a note `token` writes on `from` reaches `probe`, which follows `uri`: delivery across
 * instances that starts or resumes (a newcomer, a restart, a failover). Each try writes the note again
 * and gives its update `waitMs` to arrive.
 */
export async function untilDelivered(
  from: SampleApp,
  token: string,
  uri: string,
  probe: ListenSubscription,
  what: string,
  { waitMs, timeoutMs, intervalMs }: { waitMs: number; timeoutMs: number; intervalMs: number },
): Promise<void> {
  await eventually(
    async () => {
      expect([200, 201]).toContain((await putNote(from, token, uri, uid('after'))).status);
      return probe.waitFor(isUpdateOf(uri), { timeoutMs: waitMs }).then(
        () => true,
        () => false,
      );
    },
    what,
    { timeoutMs, intervalMs },
  );
}
