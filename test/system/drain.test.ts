/**
 * Streams that end on purpose, held to the sample apps' contract (docs/sample-app.md) on every host:
 * with `DRAIN_MS`, SIGTERM ends the open streams one after the other, each with its terminal result,
 * refuses a listen meanwhile with 503 + `Retry-After`, and the process exits 0 within `DRAIN_MS` + 5 s
 * (the contract's bound, used as the harness's stop timeout); with `MAX_STREAM_DURATION_MS`, a stream
 * ends with its terminal result and the package's client listens again with no error.
 *
 * Black-box, like test/system/shutdown.test.ts: each sample runs as a child process as `npm start`
 * would, over real HTTP on loopback with a real SSE reader per stream.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { performance } from 'node:perf_hooks';
import { listen as subscribe } from 'mcp-subscriptions/client';
import { CONTRACT_EXIT_MS, selectedSampleKinds, startSample, stopAllSamples, TOKENS } from '../helpers/sample-app.ts';
import { listen, type SseStream } from '../helpers/sse.ts';

const SAMPLES = selectedSampleKinds();

const ACK = 'notifications/subscriptions/acknowledged';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const PRINCIPALS = [TOKENS.alice, TOKENS.bob, TOKENS.carol] as const;

/** Streams open at the signal, and the drain they are spread over: one every 400 ms. */
const STREAMS = 6;
const DRAIN_MS = 2400;

afterAll(stopAllSamples);

/** The stream's last message: the terminal result for its own id, and nothing after it. */
function expectTerminalResult(stream: SseStream, id: string | number): void {
  expect(stream.events.at(-1)?.json).toStrictEqual({
    jsonrpc: '2.0',
    id,
    result: { resultType: 'complete', _meta: expect.objectContaining({ [SUBSCRIPTION_ID]: id }) },
  });
}

describe.each(SAMPLES)('%s sample', (kind) => {
  it(`DRAIN_MS=${DRAIN_MS}: SIGTERM ends ${STREAMS} streams one after the other, refuses a listen with 503 + Retry-After, exits 0 within DRAIN_MS + 5 s`, async () => {
    const app = await startSample(kind, { DRAIN_MS: String(DRAIN_MS) });
    const ids = Array.from({ length: STREAMS }, (_, i) => (i % 2 === 0 ? i : `drained-${i}`));
    const streams: SseStream[] = [];
    for (const [i, id] of ids.entries()) {
      const stream = await listen(
        app.url,
        id,
        { toolsListChanged: true },
        { authorization: `Bearer ${PRINCIPALS[i % 3]!}` },
      );
      expect(stream.status).toBe(200);
      expect((await stream.event(1, 10_000)).json?.method).toBe(ACK);
      streams.push(stream);
    }
    const order: number[] = [];
    const ends = streams.map((stream, i) => stream.end(DRAIN_MS + CONTRACT_EXIT_MS).then(() => order.push(i)));

    const signalled = performance.now();
    const exit = app.stop('SIGTERM', DRAIN_MS + CONTRACT_EXIT_MS);
    // The drain has begun once the first stream has its result; the others are still open then.
    await streams[0]!.end(DRAIN_MS + CONTRACT_EXIT_MS);
    expect(streams.slice(1).filter((stream) => stream.ended)).toHaveLength(0);

    const refused = await listen(
      app.url,
      'during-the-drain',
      { toolsListChanged: true },
      { authorization: `Bearer ${TOKENS.alice}` },
    );
    await refused.end();
    expect(refused.status).toBe(503);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(refused.text)).toStrictEqual({
      jsonrpc: '2.0',
      id: 'during-the-drain',
      error: { code: -32603, message: 'Server is draining' },
    });

    await Promise.all(ends);
    const code = await exit;
    const exitMs = performance.now() - signalled;
    for (const [i, stream] of streams.entries()) expectTerminalResult(stream, ids[i]!);
    // Spread, oldest first: not all at once.
    expect(order).toStrictEqual(ids.map((_, i) => i));
    expect(code).toBe(0);
    expect(exitMs).toBeLessThan(DRAIN_MS + CONTRACT_EXIT_MS);
    console.log(`${kind}: DRAIN_MS=${DRAIN_MS}, SIGTERM → exit (code ${code}) ${exitMs.toFixed(0)} ms`);
  }, 60_000);

  it("MAX_STREAM_DURATION_MS: a stream ends with its terminal result, counted expired; the package's client listens again with no error", async () => {
    const app = await startSample(kind, { MAX_STREAM_DURATION_MS: '600' });
    try {
      const stream = await listen(
        app.url,
        'expiring',
        { toolsListChanged: true },
        { authorization: `Bearer ${TOKENS.bob}` },
      );
      expect((await stream.event(1, 10_000)).json?.method).toBe(ACK);
      await stream.end(); // well within 5 s of a 600 ms limit
      expectTerminalResult(stream, 'expiring');

      const subscription = await subscribe(
        app.url,
        { toolsListChanged: true },
        { headers: { authorization: `Bearer ${TOKENS.alice}` }, reconnect: true },
      );
      try {
        const gap = await subscription[Symbol.asyncIterator]().next();
        expect(gap.value).toStrictEqual({
          type: 'gap',
          reason: 'complete',
          honored: { toolsListChanged: true },
          attempts: 1,
        });
        expect(subscription.error).toBeUndefined();
      } finally {
        await subscription.close();
      }
      const stats = (await app.api(TOKENS.alice, 'GET', '/api/subscriptions/stats')).body;
      expect(stats.closed.expired).toBeGreaterThanOrEqual(2);
      expect(stats.draining).toBe(false);
    } finally {
      expect(await app.stop()).toBe(0);
    }
  }, 60_000);
});
