/**
 * OpenTelemetry when the app registers no MeterProvider (the API installed, as with any app that has an
 * instrumented library): the hub records nothing, not even the time of a listen; and a provider
 * registered later is used from the next hub made, as the docs say.
 */
import { afterAll, expect, test } from '@jest/globals';
import { metrics } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { SubscriptionHub } from 'mcp-subscriptions';
import { recording, telemetryLoaded } from '../../lib/telemetry.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
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
