/**
 * "Ours with metrics" (issue 21): what an app that exports OpenTelemetry metrics to Prometheus sets up
 * before it builds its hub. A `MeterProvider` of `@opentelemetry/sdk-metrics` is registered as the global
 * one, with the Prometheus exporter as its only reader (a pull reader: cumulative sums and explicit-bucket
 * histograms, collected only when scraped). The exporter's own HTTP server is not started; the host serves
 * its scrape handler as `GET /control/metrics` instead, so a scrape is collected, serialized and written
 * by the server under test, as in production, and the orchestrator (`bench/run.ts`) scrapes it on a timer.
 *
 * Only `host.ts metrics` loads this module: the other servers never load the SDK or the exporter.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/** Answers one scrape: the Prometheus text exposition of everything the provider's meters report. */
export type ScrapeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Registers the global `MeterProvider` and returns the scrape handler. Call it before the hub is
 * constructed: the hub takes its meter from the global provider then, and a provider registered later
 * is never seen by it.
 */
export function registerMeterProvider(): ScrapeHandler {
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [exporter] });
  // `false` when a provider is registered already: then the figures would not be this provider's.
  if (!metrics.setGlobalMeterProvider(provider)) {
    throw new Error('bench/lib/metrics.ts: a global MeterProvider was registered before this one');
  }
  return (req, res) => exporter.getMetricsRequestHandler(req, res);
}
