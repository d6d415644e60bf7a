/**
 * OpenTelemetry across two nodes joined by a real Redis (`RedisBus` on 127.0.0.1:6379): the bus's
 * counters and connection state as instruments, equal to `bus.stats()`; the publish → receive lag
 * measured on the receiving node only, not by a second hub on the publisher's bus; and a publish made
 * inside a span continued by the receiving node's delivery, its W3C trace context having crossed Redis
 * in the message: recorded only when the publisher's trace is sampled and a stream matched, and with no
 * principal, URI, task id or listen id in it.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from '@jest/globals';
import { context, SpanKind, trace, TraceFlags } from '@opentelemetry/api';
import { SubscriptionHub } from 'mcp-subscriptions';
import { RedisBus } from 'mcp-subscriptions/redis';
import { telemetryLoaded } from '../../lib/telemetry.ts';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { REDIS_URL, sharedRedisMissing } from '../helpers/redis.ts';
import { failUnderCi, testUnless } from '../helpers/skip.ts';
import {
  collectLibraryMetrics,
  deliveriesOf,
  expectNoSecrets,
  libraryValues,
  metricValue as valueOf,
  registerTelemetry,
  type RegisteredTelemetry,
} from '../helpers/telemetry.ts';

const redisMissing = await sharedRedisMissing();
failUnderCi('Redis for the telemetry suite', redisMissing);

let telemetry: RegisteredTelemetry;
const URI = 'note://alice/plan';

let busA: RedisBus;
let busB: RedisBus;
let hubA: SubscriptionHub;
let hubB: SubscriptionHub;
/** A second hub on node A's bus: the bus hands it node A's events in the process, not over Redis. */
let hubA2: SubscriptionHub;

beforeAll(async () => {
  if (redisMissing !== undefined) return;
  telemetry = registerTelemetry();
  const channelPrefix = `telemetry-${randomUUID()}`;
  busA = new RedisBus({ url: REDIS_URL, channelPrefix, logger: recordingLogger() });
  busB = new RedisBus({ url: REDIS_URL, channelPrefix, logger: recordingLogger() });
  hubA = new SubscriptionHub({ logger: recordingLogger(), bus: busA });
  hubB = new SubscriptionHub({ logger: recordingLogger(), bus: busB });
  hubA2 = new SubscriptionHub({ logger: recordingLogger(), bus: busA });
  await telemetryLoaded();
  await waitFor(() => busA.stats().connected && busB.stats().connected, 'both buses connected', 10_000);
});

afterAll(async () => {
  if (redisMissing !== undefined) return;
  await hubA.close();
  await hubB.close();
  await hubA2.close();
  await busA.close();
  await busB.close();
  await telemetry.unregister();
});

testUnless(redisMissing)(
  'bus counters and state equal bus.stats(); the lag is measured and the trace crosses Redis',
  async () => {
    const res = new FakeResponse();
    await openFollowing(hubB, res, { filter: { resourceSubscriptions: [URI] } });
    telemetry.spans.reset();
    const writeSpan = trace.getTracer('notes-app').startActiveSpan('PUT /notes', (span) => {
      hubA.resourceUpdated(URI);
      span.end();
      return span;
    });
    await waitFor(() => busB.stats().received >= 1 && res.chunks.length >= 2, 'the update on node B', 10_000);

    const all = await collectLibraryMetrics(telemetry.reader);
    const a = busA.stats();
    const b = busB.stats();
    expect({
      connected: valueOf(all, 'mcp.subscriptions.bus.connected'),
      published: valueOf(all, 'mcp.subscriptions.bus.published'),
      received: valueOf(all, 'mcp.subscriptions.bus.received'),
      dropped: valueOf(all, 'mcp.subscriptions.bus.dropped'),
      lag: valueOf(all, 'mcp.subscriptions.bus.lag'),
    }).toStrictEqual({
      connected: 1,
      published: a.published + b.published,
      received: a.received + b.received,
      dropped: a.dropped + b.dropped,
      // Node B's receipt only: hub A2 got the event from its own bus, in this process, and measures nothing.
      lag: a.received + b.received,
    });
    expect([a.published, b.received]).toStrictEqual([1, 1]);

    const delivered = telemetry.spans.getFinishedSpans().filter((span) => span.name === 'deliver resource_updated');
    // Node B's only: node A holds no stream that follows the URI, so its own delivery makes no span.
    const remote = delivered.filter((span) => span.attributes['mcp.subscriptions.remote'] === true);
    expect(delivered.map((span) => span.attributes['mcp.subscriptions.remote'])).toStrictEqual([true]);
    expect(remote.map((span) => span.links.map((link) => [link.context.traceId, link.context.spanId]))).toStrictEqual([
      [[writeSpan.spanContext().traceId, writeSpan.spanContext().spanId]],
    ]);
    expect(remote[0]?.attributes['mcp.subscriptions.streams.matched']).toBe(1);
    // In the publisher's trace, a child of the publishing span: never a root that forces its own sampling.
    expect(
      remote.map((span) => [
        span.spanContext().traceId,
        span.parentSpanContext?.spanId,
        span.parentSpanContext?.isRemote,
      ]),
    ).toStrictEqual([[writeSpan.spanContext().traceId, writeSpan.spanContext().spanId, true]]);
  },
);

testUnless(redisMissing)(
  "a publish whose trace is not sampled (flags 00) is recorded by no node's delivery",
  async () => {
    const res = new FakeResponse();
    await openFollowing(hubB, res, { id: 'unsampled', filter: { resourceSubscriptions: [URI] } });
    telemetry.spans.reset();
    const receivedBefore = busB.stats().received;
    // An upstream service that decided not to sample: its request arrives with `-00` flags, and the
    // app's own span under it is not sampled either (the SDK's default sampler follows the parent).
    const upstream = trace.setSpanContext(context.active(), {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.NONE,
      isRemote: true,
    });
    const writeSpan = trace.getTracer('notes-app').startActiveSpan('PUT /notes', {}, upstream, (span) => {
      hubA.resourceUpdated(URI);
      span.end();
      return span;
    });
    expect(writeSpan.spanContext().traceFlags).toBe(TraceFlags.NONE);
    await waitFor(
      () => busB.stats().received > receivedBefore && res.chunks.length >= 2,
      'the update on node B',
      10_000,
    );
    expect(telemetry.spans.getFinishedSpans().map((span) => span.name)).toStrictEqual([]);
  },
);

testUnless(redisMissing)('a delivery over Redis that matches no stream makes no span', async () => {
  const res = new FakeResponse();
  await openFollowing(hubB, res, { id: 'task-follower', principal: 'alice', filter: { taskIds: ['task-17'] } });
  telemetry.spans.reset();
  const receivedBefore = busB.stats().received;
  trace.getTracer('notes-app').startActiveSpan('run task', (span) => {
    // Node B follows the task, but for alice: bob's task reaches node B and matches no stream there.
    hubA.taskStatus(
      {
        taskId: 'task-17',
        status: 'working',
        createdAt: '2025-01-01T00:00:00Z',
        lastUpdatedAt: '2025-01-01T00:00:00Z',
        ttlMs: null,
      },
      'bob',
    );
    span.end();
  });
  await waitFor(() => busB.stats().received > receivedBefore, 'the task event on node B', 10_000);
  expect(telemetry.spans.getFinishedSpans().map((span) => span.name)).toStrictEqual(['run task']);
  expect(res.chunks).toHaveLength(1); // the ack alone
});

testUnless(redisMissing)(
  "node B's delivery spans exist and carry no principal, URI, task id or listen id",
  async () => {
    const secrets = {
      principal: 'carol-2b8e',
      uri: 'note://carol-2b8e/ledger',
      taskId: 'task-carol-2b8e-7',
      id: 'listen-c4f0',
    };
    const res = new FakeResponse();
    await openFollowing(hubB, res, {
      id: secrets.id,
      principal: secrets.principal,
      filter: { resourceSubscriptions: [secrets.uri], taskIds: [secrets.taskId] },
    });
    telemetry.spans.reset();
    const receivedBefore = busB.stats().received;
    const writeSpan = trace.getTracer('notes-app').startActiveSpan('PUT /ledger', (span) => {
      hubA.resourceUpdated(secrets.uri);
      const now = new Date().toISOString();
      hubA.taskStatus(
        { taskId: secrets.taskId, status: 'completed', createdAt: now, lastUpdatedAt: now, ttlMs: null },
        secrets.principal,
      );
      span.end();
      return span;
    });
    // Both frames may leave in one write.
    await waitFor(
      () => busB.stats().received >= receivedBefore + 2 && res.chunks.join('').includes('notifications/tasks'),
      'both events on node B',
      10_000,
    );

    const spans = telemetry.spans.getFinishedSpans();
    // Node B's two deliveries, in the publisher's trace; node A, which holds no such stream, makes none.
    expect(deliveriesOf(spans, writeSpan)).toStrictEqual([
      ['deliver resource_updated', SpanKind.CONSUMER, true, true],
      ['deliver task_status', SpanKind.CONSUMER, true, true],
    ]);
    expectNoSecrets(libraryValues(await collectLibraryMetrics(telemetry.reader), spans), Object.values(secrets));
  },
);
