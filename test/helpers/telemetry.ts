/**
 * OpenTelemetry's SDK as the telemetry tests register it: a metric reader that collects when the test
 * asks (as a scraper does), an in-memory span exporter, the globals set and unset, the reading of one
 * instrument's value out of a collection, and what the library's spans and data points say.
 */
import { expect } from '@jest/globals';
import { context, metrics, trace, type Span, type SpanKind } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  MetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';

/** A reader that collects when the test asks, cumulative, as Prometheus reads counters. */
export class OnDemandReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** The library's instruments in one collection by `reader`; a collection error fails the test. */
export async function collectLibraryMetrics(reader: MetricReader): Promise<MetricData[]> {
  const { resourceMetrics, errors } = await reader.collect();
  if (errors.length > 0) throw new Error(`collection errors: ${errors.map(String).join('; ')}`);
  return resourceMetrics.scopeMetrics
    .filter((scope) => scope.scope.name === 'mcp-subscriptions')
    .flatMap((scope) => scope.metrics);
}

/** The instrument `name` of a collection; throws, naming those there are, when it is missing. */
export function metricNamed(all: readonly MetricData[], name: string): MetricData {
  const found = all.find((each) => each.descriptor.name === name);
  if (found === undefined) throw new Error(`no metric ${name}; have ${all.map((m) => m.descriptor.name).join(', ')}`);
  return found;
}

/**
 * A sum's or gauge's value, or a histogram's count, at the data point whose attributes are exactly
 * `attributes` (0 when there is none).
 */
export function metricValue(all: readonly MetricData[], name: string, attributes: Record<string, string> = {}): number {
  const data = metricNamed(all, name);
  const point = data.dataPoints.find((each) => JSON.stringify(each.attributes) === JSON.stringify(attributes));
  if (point === undefined) return 0;
  return data.dataPointType === DataPointType.HISTOGRAM
    ? (point.value as { count: number }).count
    : (point.value as number);
}

/** A MeterProvider and a TracerProvider with test readers, registered globally as an app does. */
export interface RegisteredTelemetry {
  readonly reader: OnDemandReader;
  readonly spans: InMemorySpanExporter;
  /** Shuts both providers down and unregisters every global. */
  unregister(): Promise<void>;
}

/** Registers the context manager and both providers: call it before making any hub. */
export function registerTelemetry(): RegisteredTelemetry {
  const reader = new OnDemandReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spans = new InMemorySpanExporter();
  const tracerProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  metrics.setGlobalMeterProvider(meterProvider);
  trace.setGlobalTracerProvider(tracerProvider);
  return {
    reader,
    spans,
    async unregister() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
      metrics.disable();
      trace.disable();
      context.disable();
    },
  };
}

/**
 * The library's delivery spans among `spans`, each as its name, kind, `mcp.subscriptions.remote`, and
 * whether it continues `publishing` (in its trace, a child of it, and linked to it alone).
 */
export function deliveriesOf(
  spans: readonly ReadableSpan[],
  publishing: Span,
): [name: string, kind: SpanKind, remote: unknown, continuesPublishing: boolean][] {
  const { traceId, spanId } = publishing.spanContext();
  return spans
    .filter((span) => span.instrumentationScope.name === 'mcp-subscriptions')
    .map((span) => [
      span.name,
      span.kind,
      span.attributes['mcp.subscriptions.remote'],
      span.spanContext().traceId === traceId &&
        span.parentSpanContext?.spanId === spanId &&
        span.links.length === 1 &&
        span.links[0]?.context.traceId === traceId &&
        span.links[0].context.spanId === spanId,
    ]);
}

/**
 * Every value the library wrote into telemetry: each data point's attribute values, and each of its
 * spans' name, attribute values, link attributes, events and status message (not the trace and span ids).
 */
export function libraryValues(all: readonly MetricData[], spans: readonly ReadableSpan[]): string[] {
  const values = (attributes: Record<string, unknown> | undefined): string[] =>
    Object.values(attributes ?? {}).map(String);
  return [
    ...all.flatMap((each) => each.dataPoints.flatMap((point) => values(point.attributes))),
    ...spans
      .filter((span) => span.instrumentationScope.name === 'mcp-subscriptions')
      .flatMap((span) => [
        span.name,
        ...values(span.attributes),
        ...span.links.flatMap((link) => values(link.attributes)),
        ...span.events.flatMap((event) => [event.name, ...values(event.attributes)]),
        span.status.message ?? '',
      ]),
  ];
}

/** Fails, naming the value and the secret, when any of `values` contains any of `secrets`. */
export function expectNoSecrets(values: readonly string[], secrets: readonly string[]): void {
  const leaks = values.flatMap((value) =>
    secrets.filter((secret) => value.includes(secret)).map((secret) => ({ value, secret })),
  );
  expect(leaks).toStrictEqual([]);
}
