/**
 * OpenTelemetry when the app registers no MeterProvider and no TracerProvider (the API installed, as
 * with any app that has an instrumented library): the hub records nothing, not even the time of a
 * listen or of a delivery that carries another node's trace context; and a provider registered later
 * is used from the next hub made, as the docs say.
 */
import { afterAll, expect, jest, test } from '@jest/globals';
import { metrics } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { MemoryBus, SubscriptionHub } from 'mcp-subscriptions';
import { recording, telemetryLoaded } from '../../lib/telemetry.ts';
import { FakeResponse, openFollowing, recordingLogger } from '../helpers/fake-response.ts';
import { OnDemandReader } from '../helpers/telemetry.ts';

const hubs: SubscriptionHub[] = [];
afterAll(async () => {
  await Promise.all(hubs.map((hub) => hub.close()));
  metrics.disable();
});

test('no provider: nothing records; a provider registered later counts from the next hub on', async () => {
  const first = new SubscriptionHub({ logger: recordingLogger() });
  hubs.push(first);
  await telemetryLoaded();
  expect(recording()).toBe(false);
  first.toolsListChanged();

  const reader = new OnDemandReader();
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  expect(recording()).toBe(false);
  const second = new SubscriptionHub({ logger: recordingLogger() });
  hubs.push(second);
  expect(recording()).toBe(true);
  second.toolsListChanged();

  const { resourceMetrics } = await reader.collect();
  const published = resourceMetrics.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .find((metric) => metric.descriptor.name === 'mcp.subscriptions.events.published');
  // Both hubs are read at collection (their stats are what they are), summed.
  expect(published?.dataPoints.map((point) => point.value)).toStrictEqual([
    first.stats().published + second.stats().published,
  ]);
  expect(first.stats().published + second.stats().published).toBe(2);
});

test('no TracerProvider: a delivery whose event carries a trace context reads no clock', async () => {
  const bus = new MemoryBus();
  const hub = new SubscriptionHub({ logger: recordingLogger(), bus });
  hubs.push(hub);
  await telemetryLoaded();
  const res = new FakeResponse();
  await openFollowing(hub, res, { filter: { toolsListChanged: true } });
  // Another node's event, published in a sampled trace, as a bus hands it over.
  const peer = bus.join({ event: () => undefined, cancel: () => undefined });
  const clock = jest.spyOn(performance, 'now');
  try {
    peer.publish(
      { kind: 'tools_list_changed' },
      { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    );
    expect(clock).not.toHaveBeenCalled();
  } finally {
    clock.mockRestore();
    await peer.leave();
  }
  expect(res.chunks.join('')).toContain('notifications/tools/list_changed');
});
