/**
 * The exposition parser the sample contract's metrics rows rely on (test/helpers/prometheus.ts), read
 * against what `@opentelemetry/exporter-prometheus` really writes, label values that need escaping
 * included: a parser that misread them would let a leaked value or a wrong count through. No socket:
 * the exporter's reader is collected and serialized in-process.
 */
import { describe, expect, test } from '@jest/globals';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { labelValues, parseExposition, seriesOf, totalOf } from '../helpers/prometheus.ts';

/** The text the exporter answers a scrape with, after `record` used a meter of a provider of its own. */
async function exposition(record: (meter: ReturnType<MeterProvider['getMeter']>) => void): Promise<string> {
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [exporter] });
  try {
    record(provider.getMeter('parser-test'));
    const { resourceMetrics } = await exporter.collect();
    return new PrometheusSerializer().serialize(resourceMetrics);
  } finally {
    await provider.shutdown();
  }
}

describe('parseExposition', () => {
  test("reads the exporter's counters, up-down counters and histograms, with their TYPE and UNIT", async () => {
    const text = await exposition((meter) => {
      const events = meter.createCounter('demo.events', { description: 'Events seen' });
      events.add(3, { 'demo.kind': 'a' });
      events.add(2, { 'demo.kind': 'b' });
      meter.createUpDownCounter('demo.open').add(-1);
      const duration = meter.createHistogram('demo.duration', { unit: 's' });
      duration.record(0.2);
      duration.record(7);
    });
    const parsed = parseExposition(text);
    expect(parsed.types.get('demo_events_total')).toBe('counter');
    expect(totalOf(parsed, 'demo_events_total')).toBe(5);
    expect(totalOf(parsed, 'demo_events_total', { demo_kind: 'b' })).toBe(2);
    expect(seriesOf(parsed, 'demo_events_total', { demo_kind: 'a' })[0]?.labels['otel_scope_name']).toBe('parser-test');
    expect(parsed.types.get('demo_open')).toBe('gauge');
    expect(totalOf(parsed, 'demo_open')).toBe(-1);
    expect(parsed.types.get('demo_duration')).toBe('histogram');
    expect(parsed.units.get('demo_duration')).toBe('s');
    expect(totalOf(parsed, 'demo_duration_count')).toBe(2);
    expect(totalOf(parsed, 'demo_duration_sum')).toBeCloseTo(7.2);
    expect(totalOf(parsed, 'demo_duration_bucket', { le: '+Inf' })).toBe(2);
    expect(totalOf(parsed, 'no_such_metric')).toBe(0);
  });

  test('unescapes label values exactly: quotes, backslashes and line breaks', async () => {
    const tricky = 'say "hi" \\ to\nalice, } {x="y"}';
    const text = await exposition((meter) => meter.createCounter('demo.escapes').add(4, { 'demo.value': tricky }));
    const parsed = parseExposition(text);
    expect(seriesOf(parsed, 'demo_escapes_total', { demo_value: tricky }).map((sample) => sample.value)).toStrictEqual([
      4,
    ]);
    expect(labelValues(parsed)).toContain(tricky);
  });

  test.each([
    ['an unterminated label value', 'x{a="b} 1'],
    ['a bad escape', 'x{a="\\q"} 1'],
    ['no value', 'x{a="b"}'],
    ['a value that is no number', 'x 1two'],
    ['too many fields', 'x 1 2 3'],
    ['a label given twice', 'x{a="1",a="2"} 1'],
    ['an unknown TYPE', '# TYPE x nonsense'],
    ['a name that is no name', '1x 1'],
  ])('throws on a line a scraper would reject: %s', (_what, line) => {
    expect(() => parseExposition(`# HELP ok fine\nok 1\n${line}\n`)).toThrow(line);
  });

  test('takes +Inf, -Inf, NaN, exponents and a timestamp; skips other comments', () => {
    const parsed = parseExposition('# a comment\nx{le="+Inf"} +Inf\ny -Inf\nz NaN\nw 1.5e3 1700000000000\n');
    expect(parsed.samples.map((sample) => [sample.name, sample.value])).toStrictEqual([
      ['x', Infinity],
      ['y', -Infinity],
      ['z', Number.NaN],
      ['w', 1500],
    ]);
  });
});
