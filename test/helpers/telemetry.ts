/**
 * OpenTelemetry's SDK as the telemetry tests register it: a metric reader that collects when the test
 * asks (as a scraper does), an in-memory span exporter, the globals set and unset, and the reading of
 * one instrument's value out of a collection.
 */
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  MetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

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
