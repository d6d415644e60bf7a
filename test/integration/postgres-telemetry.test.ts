/**
 * OpenTelemetry across two nodes joined by a real PostgreSQL (`PostgresBus` on 127.0.0.1:5432): the
 * bus's counters and connection state as instruments, equal to `bus.stats()` (the instruments read any
 * bus's stats by their field names: nothing of the PostgreSQL bus is wired in lib/), the publish →
 * receive lag measured on the receiving node, and the W3C trace context carried in the NOTIFY payload
 * so that the receiving node's delivery continues the publisher's trace.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from '@jest/globals';
import { trace } from '@opentelemetry/api';
import { SubscriptionHub } from 'mcp-subscriptions';
import { PostgresBus } from 'mcp-subscriptions/postgres';
import { telemetryLoaded } from '../../lib/telemetry.ts';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { PG_URL, postgresMissing } from '../helpers/postgres.ts';
import { failUnderCi, testUnless } from '../helpers/skip.ts';
import {
  collectLibraryMetrics,
  metricValue as valueOf,
  registerTelemetry,
  type RegisteredTelemetry,
} from '../helpers/telemetry.ts';

const missing = await postgresMissing();
failUnderCi('PostgreSQL for the telemetry suite', missing);

let telemetry: RegisteredTelemetry;
const URI = 'note://alice/plan';

let busA: PostgresBus;
let busB: PostgresBus;
let hubA: SubscriptionHub;
let hubB: SubscriptionHub;

beforeAll(async () => {
  if (missing !== undefined) return;
  telemetry = registerTelemetry();
  const channelPrefix = `telemetry-${randomUUID().slice(0, 8)}`;
  busA = new PostgresBus({ url: PG_URL, channelPrefix, spillTable: false, logger: recordingLogger() });
  busB = new PostgresBus({ url: PG_URL, channelPrefix, spillTable: false, logger: recordingLogger() });
  hubA = new SubscriptionHub({ logger: recordingLogger(), bus: busA });
  hubB = new SubscriptionHub({ logger: recordingLogger(), bus: busB });
  await telemetryLoaded();
  await waitFor(() => busA.stats().connected && busB.stats().connected, 'both buses connected', 10_000);
});

afterAll(async () => {
  if (missing !== undefined) return;
  await hubA.close();
  await hubB.close();
  await busA.close();
  await busB.close();
  await telemetry.unregister();
});

testUnless(missing)(
  'bus counters and state equal bus.stats(); the lag is measured and the trace crosses PostgreSQL',
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
    await waitFor(() => busA.stats().published >= 1, "A's NOTIFY acknowledged");

    const all = await collectLibraryMetrics(telemetry.reader);
    const a = busA.stats();
    const b = busB.stats();
    expect({
      connected: valueOf(all, 'mcp.subscriptions.bus.connected'),
      published: valueOf(all, 'mcp.subscriptions.bus.published'),
      received: valueOf(all, 'mcp.subscriptions.bus.received'),
      dropped: valueOf(all, 'mcp.subscriptions.bus.dropped'),
      unsent: valueOf(all, 'mcp.subscriptions.bus.unsent'),
      lag: valueOf(all, 'mcp.subscriptions.bus.lag'),
    }).toStrictEqual({
      connected: 1,
      published: a.published + b.published,
      received: a.received + b.received,
      dropped: 0,
      unsent: 0,
      lag: a.received + b.received,
    });
    expect([a.published, b.received]).toStrictEqual([1, 1]);

    const remote = telemetry.spans
      .getFinishedSpans()
      .filter(
        (span) => span.name === 'deliver resource_updated' && span.attributes['mcp.subscriptions.remote'] === true,
      );
    expect(remote.map((span) => [span.spanContext().traceId, span.parentSpanContext?.spanId])).toStrictEqual([
      [writeSpan.spanContext().traceId, writeSpan.spanContext().spanId],
    ]);
  },
);
