/**
 * Event contexts (the bus's `EventContext`) for the Redis wire's tests, valid and almost valid: as the
 * `at` and `trace` members of a wire v2 event message, for the decoder's fuzzers (test/unit/redis-wire.test.ts
 * and test/system/redis-wire-fuzz.test.ts), and as objects a bus member's caller might hand `publish()`,
 * for what the writer carries of them. Whether each is valid is the wire oracle's call
 * (test/helpers/wire-oracle.ts), never this file's.
 */
import { fc } from '@fast-check/jest';
import { literal, type JsonEntry, type JsonNode } from './json-text.ts';

/** The W3C Trace Context's own example of a traceparent. */
export const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

const hex = (length: number): fc.Arbitrary<string> =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });

/** Traceparents: well formed with random ids, at the edges of validity, and almost right. */
export const traceparentArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(hex(32), hex(16), hex(2)).map(([trace, span, flags]) => `00-${trace}-${span}-${flags}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      TRACEPARENT,
      `00-${'0'.repeat(31)}1-${'0'.repeat(15)}1-00`,
      `00-${'f'.repeat(32)}-${'f'.repeat(16)}-ff`,
    ),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      TRACEPARENT.toUpperCase(),
      TRACEPARENT.replace('4bf9', '4BF9'),
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`,
      TRACEPARENT.replace(/^00/, '01'),
      TRACEPARENT.replace(/^00/, 'ff'),
      `${TRACEPARENT}-00`,
      TRACEPARENT.slice(0, -1),
      `${TRACEPARENT}0`,
      `${TRACEPARENT}\n`,
      ` ${TRACEPARENT}`,
      TRACEPARENT.replaceAll('-', '_'),
      TRACEPARENT.replace('4736', '473g'),
      TRACEPARENT.replace('-01', '-1'),
      '00-4bf92f3577b34da6a3ce929d0e0e4736--01',
      '',
    ),
  },
);

/** Tracestates: printable ASCII up to and past 512 characters, quotes and backslashes, control and non-ASCII characters. */
export const tracestateArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '',
      'rojo=00f067aa0ba902b7',
      'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
      'a="q" \\ ~ b',
      'x'.repeat(512),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)),
      maxLength: 40,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('x'.repeat(513), 'a=1\tb=2', 'a=1\nb=2', 'a=é', 'a=\u0000', 'a=\u007f', 'a=😀'),
  },
);

/** `at` as JSON text: times, the edges of "finite and not negative", and other types. */
const AT_TEXTS = [
  '1764650000123',
  '1764650000123.5',
  '0',
  '-0',
  '0.0',
  '1e21',
  '5e-324',
  '-1',
  '-1e-300',
  '1e999',
  '-1e999',
  '"1764650000123"',
  'null',
  'true',
  '[1764650000123]',
  '{}',
];

/** `at` as a node may find it in a message. */
export const atNode: fc.Arbitrary<JsonNode> = fc.oneof(
  fc.integer({ min: 1.7e12, max: 1.9e12 }).map((at) => literal(String(at))),
  fc.double({ min: 0, max: 4e12, noNaN: true }).map((at) => literal(JSON.stringify(at))),
  fc.constantFrom(...AT_TEXTS).map(literal),
);

const str = (value: string): JsonNode => literal(JSON.stringify(value));
const entry = (key: string, value: JsonNode, escaped = false): JsonEntry => ({ key, escaped, value });

/** `trace` as a node may find it in a message: the object, with keys missing, extra or escaped, or no object at all. */
export const traceNode: fc.Arbitrary<JsonNode> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({
        traceparent: fc.oneof(
          { weight: 16, arbitrary: traceparentArb.map(str) },
          { weight: 1, arbitrary: fc.constant(literal('1')) },
          { weight: 1, arbitrary: fc.constant(undefined) },
        ),
        tracestate: fc.oneof(
          { weight: 10, arbitrary: tracestateArb.map(str) },
          { weight: 1, arbitrary: fc.constant(literal('null')) },
          { weight: 5, arbitrary: fc.constant(undefined) },
        ),
        extra: fc.oneof(
          { weight: 1, arbitrary: fc.constantFrom('__proto__', 'traceId', 'x', 'tracestate ', 'Traceparent') },
          { weight: 6, arbitrary: fc.constant(undefined) },
        ),
        escaped: fc.boolean(),
        reversed: fc.boolean(),
      })
      .map(({ traceparent, tracestate, extra, escaped, reversed }) => {
        const entries = [
          ...(traceparent === undefined ? [] : [entry('traceparent', traceparent, escaped)]),
          ...(tracestate === undefined ? [] : [entry('tracestate', tracestate)]),
          ...(extra === undefined ? [] : [entry(extra, str('x'))]),
        ];
        return { kind: 'object' as const, entries: reversed ? entries.reverse() : entries };
      }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('null', '[]', '{}', '1', JSON.stringify(TRACEPARENT), `[{"traceparent":"${TRACEPARENT}"}]`)
      .map(literal),
  },
);

/** The context members of a wire v2 event message: none (often), `at`, `trace`, or both. */
export const contextEntriesArb: fc.Arbitrary<JsonEntry[]> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<JsonEntry[]>([]) },
  {
    weight: 4,
    arbitrary: fc
      .record({
        at: fc.oneof(atNode, fc.constant(undefined)),
        trace: fc.oneof(traceNode, fc.constant(undefined)),
      })
      .map(({ at, trace }) => [
        ...(at === undefined ? [] : [entry('at', at)]),
        ...(trace === undefined ? [] : [entry('trace', trace)]),
      ]),
  },
);

/**
 * Contexts as a caller of `member.publish(event, context)` might hand them: the hub's valid ones, and a
 * custom caller's mistakes (a time that is no number, a malformed traceparent, a tracestate too long).
 */
export const callerContextArb: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    publishedAt: fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 1.7e12, max: 1.9e12 }) },
      { weight: 2, arbitrary: fc.double({ min: 0, max: 4e12, noNaN: true }) },
      { weight: 1, arbitrary: fc.constantFrom<unknown>(-1, Number.NaN, Infinity, '1764650000123', null) },
    ),
    traceparent: fc.oneof({ weight: 9, arbitrary: traceparentArb }, { weight: 1, arbitrary: fc.constant<unknown>(7) }),
    tracestate: fc.oneof({ weight: 9, arbitrary: tracestateArb }, { weight: 1, arbitrary: fc.constant<unknown>([]) }),
  },
  { requiredKeys: [] },
);
