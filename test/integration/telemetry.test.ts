/**
 * OpenTelemetry, as an operator meets it: a MeterProvider and a TracerProvider registered globally
 * before the hubs are made (the SDK's own, with readers that collect on demand), an Express app with the
 * middleware over real loopback HTTP and a real SSE reader, and a workload. The instruments must say
 * what `hub.stats()` says, carry no principal, URI, task id or listen id (nor may the delivery spans),
 * and a publish made inside a span must be continued by each hub's delivery of it that reached a stream.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { SpanKind, trace } from '@opentelemetry/api';
import type { MetricData } from '@opentelemetry/sdk-metrics';
import express from 'express';
import { MemoryBus, SubscriptionHub, type EventContext } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { telemetryLoaded } from '../../lib/telemetry.ts';
import { authFromUserHeader, listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { listen, listenBody, listenHeaders, post, TASKS_META, type SseStream } from '../helpers/sse.ts';
import {
  collectLibraryMetrics,
  deliveriesOf,
  expectNoSecrets,
  libraryValues,
  metricNamed as metric,
  metricValue as valueOf,
  registerTelemetry,
  type RegisteredTelemetry,
} from '../helpers/telemetry.ts';

const SECRETS = {
  principals: ['alice-7f3a', 'bob-91c2'],
  uris: ['note://alice-7f3a/diary', 'note://bob-91c2/plans', 'note://alice-7f3a/refused'],
  taskIds: ['task-alice-7f3a-0042'],
  listenIds: ['a1', 'b1', 'a2', 'bad', 'listen-5e1d'],
};
const ALL_SECRETS = Object.values(SECRETS).flat();

let telemetry: RegisteredTelemetry;
let bus: MemoryBus;
let hubA: SubscriptionHub;
let hubB: SubscriptionHub;
let server: RunningServer;
const streams: SseStream[] = [];

beforeAll(async () => {
  // As an app does: the SDK first, then the library's objects.
  telemetry = registerTelemetry();
  bus = new MemoryBus();
  hubA = new SubscriptionHub({ logger: recordingLogger(), bus, maxSubscriptionsPerPrincipal: 2 });
  // A second node of the same process (a MemoryBus joins hubs): what it receives is measured too.
  hubB = new SubscriptionHub({ logger: recordingLogger(), bus });
  await telemetryLoaded();
  const app = express();
  app.post(
    '/mcp',
    authFromUserHeader,
    mcpSubscriptions({
      hub: hubA,
      capabilities: { toolsListChanged: true, resourceSubscriptions: true, tasks: true },
      canRead: (uri, { principal }) => uri.startsWith(`note://${principal}/`),
      canAccessTask: (taskId, { principal }) => taskId.startsWith(`task-${principal}-`),
      handleSubscribeResource: (uri) => !uri.endsWith('/refused'),
      keepAliveMs: false,
    }),
    (_req, res) => {
      res.status(404).end();
    },
  );
  server = await listenOn(app);
});

afterAll(async () => {
  for (const stream of streams) stream.close();
  await hubA.close();
  await hubB.close();
  await server.close();
  await telemetry.unregister();
});

async function open(id: string, user: string, notifications: Record<string, unknown>): Promise<SseStream> {
  const stream = await listen(server.url, id, notifications, { 'x-user': user });
  streams.push(stream);
  await stream.event(1);
  return stream;
}

function collect(): Promise<MetricData[]> {
  return collectLibraryMetrics(telemetry.reader);
}

describe('metrics agree with hub.stats() after a workload', () => {
  test('streams, listens, refusals, closes, deliveries, authorization, ack latency', async () => {
    const alice = await open('a1', 'alice-7f3a', {
      toolsListChanged: true,
      resourceSubscriptions: [SECRETS.uris[0], SECRETS.uris[1], SECRETS.uris[2]],
    });
    const bob = await open('b1', 'bob-91c2', { resourceSubscriptions: [SECRETS.uris[1]] });
    // Refused: invalid params (an entry that is not a URI), then capacity (alice's third stream).
    const invalid = await post(
      server.url,
      {
        jsonrpc: '2.0',
        id: 'bad',
        method: 'subscriptions/listen',
        params: { notifications: { resourceSubscriptions: [7] } },
      },
      listenHeaders({ 'x-user': 'alice-7f3a' }),
    );
    await invalid.end();
    await open('a2', 'alice-7f3a', { toolsListChanged: true });
    const third = await listen(server.url, 'a3', { toolsListChanged: true }, { 'x-user': 'alice-7f3a' });
    streams.push(third);
    await third.end();
    expect([invalid.status, third.status]).toStrictEqual([400, 503]);

    hubA.toolsListChanged();
    hubA.resourceUpdated(SECRETS.uris[0] as string);
    hubB.resourceUpdated(SECRETS.uris[1] as string); // reaches bob on hub A over the bus
    await alice.until(() => alice.events.length >= 3, 'alice: ack, tools, update');
    await bob.until(() => bob.events.length >= 2, 'bob: ack, update');
    bob.close();
    await waitFor(() => hubA.stats().openStreams === 2, 'bob gone');

    const all = await collect();
    const stats = hubA.stats();
    const statsB = hubB.stats();
    expect({
      streams: valueOf(all, 'mcp.subscriptions.streams'),
      opened: valueOf(all, 'mcp.subscriptions.listens.opened'),
      published: valueOf(all, 'mcp.subscriptions.events.published'),
      deliveries: valueOf(all, 'mcp.subscriptions.deliveries'),
      closedByClient: valueOf(all, 'mcp.subscriptions.streams.closed', { 'mcp.subscriptions.close.reason': 'client' }),
      refusedCapacity: valueOf(all, 'mcp.subscriptions.listens.refused', { 'error.type': 'capacity' }),
      refusedInvalid: valueOf(all, 'mcp.subscriptions.listens.refused', { 'error.type': 'invalid-params' }),
      followingTools: valueOf(all, 'mcp.subscriptions.streams.following', {
        'mcp.subscriptions.event.kind': 'tools_list_changed',
      }),
      followingResources: valueOf(all, 'mcp.subscriptions.streams.following', {
        'mcp.subscriptions.event.kind': 'resource_updated',
      }),
    }).toStrictEqual({
      streams: stats.openStreams + statsB.openStreams,
      opened: stats.opened + statsB.opened,
      published: stats.published + statsB.published,
      deliveries: stats.written + statsB.written,
      closedByClient: stats.closed.client,
      refusedCapacity: stats.refusals.capacity,
      refusedInvalid: stats.refusals['invalid-params'],
      followingTools: stats.listening.toolsListChanged,
      followingResources: 1, // alice's first stream; bob's is closed
    });
    // And the workload's own numbers, so that agreeing at zero would not pass.
    expect([
      stats.opened,
      stats.written,
      stats.closed.client,
      stats.refusals.capacity,
      stats.refusals['invalid-params'],
    ]).toStrictEqual([3, 4, 1, 1, 1]);

    // Authorization: alice asked for 3 URIs (one not hers, one refused by the subscribe hook), bob for 1.
    const checks = (check: string, outcome: string): number =>
      valueOf(all, 'mcp.subscriptions.authorization.checks', {
        'mcp.subscriptions.check': check,
        'mcp.subscriptions.check.outcome': outcome,
      });
    expect({
      readAllowed: checks('can_read', 'allowed'),
      readDenied: checks('can_read', 'denied'),
      hookAllowed: checks('handle_subscribe_resource', 'allowed'),
      hookDenied: checks('handle_subscribe_resource', 'denied'),
    }).toStrictEqual({ readAllowed: 3, readDenied: 1, hookAllowed: 2, hookDenied: 1 });
    expect(valueOf(all, 'mcp.subscriptions.authorization.duration')).toBe(2); // the two listens with URIs
    expect(valueOf(all, 'mcp.subscriptions.ack.duration')).toBe(stats.opened);
    // Buckets in seconds, from half a millisecond: not the SDK's millisecond defaults.
    const ack = metric(all, 'mcp.subscriptions.ack.duration').dataPoints[0]?.value as {
      buckets: { boundaries: number[] };
    };
    expect(ack.buckets.boundaries.slice(0, 3)).toStrictEqual([0.0005, 0.001, 0.0025]);
    // Hub A received one event over the bus (hub B's), hub B two (hub A's), but in this process: the
    // bus lag is for events that crossed between processes, so none is measured (the SDK then reports no
    // such metric at all).
    expect(all.map((each) => each.descriptor.name)).not.toContain('mcp.subscriptions.bus.lag');
  });

  test('no attribute of any metric or span carries a principal, a URI, a task id or a listen id', async () => {
    // Delivery spans to check: a URI and a task published inside a span, delivered by hub A to a stream
    // of its own and, from hub B, over the bus.
    for (const stream of streams.splice(0)) stream.close();
    await waitFor(() => hubA.stats().openStreams === 0, 'the earlier streams gone');
    const [uri] = SECRETS.uris as [string];
    const [taskId] = SECRETS.taskIds as [string];
    const alice = await post(
      server.url,
      listenBody('listen-5e1d', { resourceSubscriptions: [uri], taskIds: [taskId] }, TASKS_META),
      listenHeaders({ 'x-user': 'alice-7f3a' }),
    );
    streams.push(alice);
    await alice.event(1);
    telemetry.spans.reset();
    const writeSpan = trace.getTracer('notes-app').startActiveSpan('PUT /notes', (span) => {
      hubA.resourceUpdated(uri);
      const now = new Date().toISOString();
      hubA.taskStatus({ taskId, status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs: null }, 'alice-7f3a');
      hubB.resourceUpdated(uri);
      span.end();
      return span;
    });
    await alice.until(() => alice.events.length >= 4, 'ack, update, task, update over the bus');
    const spans = telemetry.spans.getFinishedSpans();
    expect(deliveriesOf(spans, writeSpan)).toStrictEqual([
      ['deliver resource_updated', SpanKind.CONSUMER, false, true],
      ['deliver task_status', SpanKind.CONSUMER, false, true],
      ['deliver resource_updated', SpanKind.CONSUMER, true, true],
    ]);

    const values = libraryValues(await collect(), spans);
    expect(values.filter((value) => value.startsWith('deliver '))).toHaveLength(3);
    expectNoSecrets(values, ALL_SECRETS);
  });
});

describe('a trace across nodes', () => {
  test('a publish inside a span is linked from the delivery on every hub that delivers it', async () => {
    for (const stream of streams.splice(0)) stream.close();
    await waitFor(() => hubA.stats().openStreams === 0, 'the earlier streams gone');
    const alice = await open('t1', 'alice-7f3a', { resourceSubscriptions: [SECRETS.uris[0]] });
    telemetry.spans.reset();
    const tracer = trace.getTracer('notes-app');
    const writeSpan = tracer.startActiveSpan('PUT /notes', (span) => {
      hubB.resourceUpdated(SECRETS.uris[0] as string);
      span.end();
      return span;
    });
    await alice.until(() => alice.events.length >= 2, 'the update');
    const delivered = telemetry.spans.getFinishedSpans().filter((span) => span.name === 'deliver resource_updated');
    // Hub A's, over the bus; hub B (the publisher) holds no stream that follows the URI, so it makes none.
    expect(delivered).toHaveLength(1);
    for (const span of delivered) {
      expect(span.links.map((link) => [link.context.traceId, link.context.spanId])).toStrictEqual([
        [writeSpan.spanContext().traceId, writeSpan.spanContext().spanId],
      ]);
    }
    expect(
      delivered.map((span) => [
        span.attributes['mcp.subscriptions.remote'],
        span.attributes['mcp.subscriptions.streams.matched'],
      ]),
    ).toStrictEqual([[true, 1]]);
  });

  test('a delivery that matches no stream on its hub makes no span', async () => {
    for (const stream of streams.splice(0)) stream.close();
    await waitFor(() => hubA.stats().openStreams === 0, 'the earlier streams gone');
    const bob = await open('t3', 'bob-91c2', { resourceSubscriptions: [SECRETS.uris[1]] });
    telemetry.spans.reset();
    trace.getTracer('notes-app').startActiveSpan('PUT /notes', (span) => {
      // Followed on neither hub: delivered here and over the bus, to no stream.
      hubB.resourceUpdated(SECRETS.uris[0] as string);
      hubA.toolsListChanged();
      // Followed on hub A only: hub A's delivery is traced, hub B's (the publisher's) is not.
      hubB.resourceUpdated(SECRETS.uris[1] as string);
      span.end();
    });
    await bob.until(() => bob.events.length >= 2, 'the update');
    expect(
      telemetry.spans
        .getFinishedSpans()
        .map((span) => [span.name, span.attributes['mcp.subscriptions.remote'] ?? 'app']),
    ).toStrictEqual([
      ['deliver resource_updated', true],
      ['PUT /notes', 'app'],
    ]);
  });

  test('a context a custom bus gets wrong is left out, and the event is delivered all the same', async () => {
    for (const stream of streams.splice(0)) stream.close();
    await waitFor(() => hubA.stats().openStreams === 0, 'the earlier streams gone');
    const alice = await open('t2', 'alice-7f3a', { toolsListChanged: true });
    telemetry.spans.reset();
    // Another member of the bus, publishing as a bus of one's own might: malformed parts of a context.
    const member = bus.join({ event: () => undefined, cancel: () => undefined });
    const bad = [
      { traceparent: '00-00000000000000000000000000000009-000000000000000f-01', tracestate: [] },
      { traceparent: 'not a traceparent', publishedAt: 'yesterday' },
      { traceparent: 42, publishedAt: Number.NaN },
    ] as unknown as EventContext[];
    for (const context of bad) member.publish({ kind: 'tools_list_changed' }, context);
    await member.leave();
    await alice.until(() => alice.events.length >= 4, 'three tools changes');
    // Only the first carried a valid traceparent: its delivery is traced, without the bad tracestate, by
    // hub A (alice's stream); hub B, which holds no stream, makes no span.
    expect(
      telemetry.spans.getFinishedSpans().map((span) => [span.name, span.links[0]?.context.traceState]),
    ).toStrictEqual([['deliver tools_list_changed', undefined]]);
  });

  test('a publish outside any span makes no span', () => {
    telemetry.spans.reset();
    hubA.toolsListChanged();
    hubB.resourceUpdated(SECRETS.uris[0] as string);
    expect(telemetry.spans.getFinishedSpans()).toStrictEqual([]);
  });
});

describe('streams that end on purpose', () => {
  test('the draining gauge, expired and drained closes and draining refusals say what stats() says', async () => {
    const hubC = new SubscriptionHub({ logger: recordingLogger(), maxStreamDurationMs: 200 });
    const app = express();
    app.post('/mcp', authFromUserHeader, mcpSubscriptions({ hub: hubC, capabilities: { toolsListChanged: true } }));
    const serverC = await listenOn(app);
    try {
      const expiring = await listen(serverC.url, 'e1', { toolsListChanged: true }, { 'x-user': 'alice-7f3a' });
      await expiring.end(); // ended by maxStreamDurationMs
      const open = await listen(serverC.url, 'd1', { toolsListChanged: true }, { 'x-user': 'bob-91c2' });
      await open.event(1);
      const drained = hubC.drain({ overMs: 60_000 }); // the first stream at once: `open`
      await open.end();
      const refused = await listen(serverC.url, 'r1', { toolsListChanged: true }, { 'x-user': 'alice-7f3a' });
      await refused.end();
      expect(refused.status).toBe(503);
      await drained;

      const all = await collect();
      const each = [hubA.stats(), hubB.stats(), hubC.stats()];
      const sum = (read: (stats: (typeof each)[number]) => number): number =>
        each.reduce((total, stats) => total + read(stats), 0);
      const closed = (reason: string): number =>
        valueOf(all, 'mcp.subscriptions.streams.closed', { 'mcp.subscriptions.close.reason': reason });
      expect({
        draining: valueOf(all, 'mcp.subscriptions.hubs.draining'),
        expired: closed('expired'),
        drained: closed('drained'),
        refusedDraining: valueOf(all, 'mcp.subscriptions.listens.refused', { 'error.type': 'draining' }),
      }).toStrictEqual({
        draining: 1,
        expired: sum((stats) => stats.closed.expired),
        drained: sum((stats) => stats.closed.drained),
        refusedDraining: sum((stats) => stats.refusals.draining),
      });
      // And the workload's own numbers, so that agreeing at zero would not pass.
      expect([hubC.stats().closed.expired, hubC.stats().closed.drained, hubC.stats().refusals.draining]).toStrictEqual([
        1, 1, 1,
      ]);
    } finally {
      await hubC.close();
      await serverC.close();
    }
    // Closed: no longer draining.
    expect(valueOf(await collect(), 'mcp.subscriptions.hubs.draining')).toBe(0);
  });
});
