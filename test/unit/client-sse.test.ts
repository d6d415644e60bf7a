/**
 * The client's event-stream parser (adapters/client/sse-reader.ts), byte by byte: the WHATWG rules as
 * servers exercise them, and the same events whichever way the bytes are split into chunks.
 */
import { describe, expect, test } from '@jest/globals';
import { SseEventTooLargeError, SseReader, type SseEvent } from '../../adapters/client/sse-reader.ts';

interface Parsed {
  events: SseEvent[];
  comments: string[];
  retries: number[];
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** Parses `input` fed as the given chunks (byte arrays), then ends the stream. */
function parse(chunks: readonly Uint8Array[]): Parsed {
  const parsed: Parsed = { events: [], comments: [], retries: [] };
  const reader = new SseReader({
    event: (event) => parsed.events.push(event),
    comment: (text) => parsed.comments.push(text),
    retry: (ms) => parsed.retries.push(ms),
  });
  for (const chunk of chunks) reader.push(chunk);
  reader.end();
  return parsed;
}

const whole = (input: Uint8Array | string): Parsed => parse([typeof input === 'string' ? bytes(input) : input]);

/** Every way of cutting `input` in two, and byte by byte. */
function splits(input: Uint8Array): Uint8Array[][] {
  const ways: Uint8Array[][] = [];
  for (let at = 0; at <= input.length; at++) ways.push([input.slice(0, at), input.slice(at)]);
  ways.push(Array.from(input, (byte) => Uint8Array.of(byte)));
  return ways;
}

const message = (data: string, lastEventId = ''): SseEvent => ({ type: 'message', data, lastEventId });

/** A stream with a bit of everything, as a listen server writes it and then some. */
const SAMPLE = [
  '\uFEFF: keepalive\r\n',
  'event: message\r\n',
  'data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"}\r\n',
  '\r\n',
  ':no space\n',
  'id: 7\n',
  'data:first line\n',
  'data: second line: with a colon\n',
  'data:  two spaces\n',
  '\n',
  'event: other\r',
  'data: caf\u00e9 \u{1F600} \u2028\r',
  'retry: 1500\r',
  '\r',
  'data\n',
  '\n',
  'event: nothing\n',
  '\n',
  'data: after a type with no data\n',
  '\n',
  'data: unfinished',
].join('');

const SAMPLE_PARSED: Parsed = {
  events: [
    message('{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"}'),
    message('first line\nsecond line: with a colon\n two spaces', '7'),
    { type: 'other', data: 'caf\u00e9 \u{1F600} \u2028', lastEventId: '7' },
    message('', '7'),
    message('after a type with no data', '7'),
  ],
  comments: ['keepalive', 'no space'],
  retries: [1500],
};

describe('SseReader', () => {
  test('a stream with comments, fields, multi-line data, every line end and a BOM', () => {
    expect(whole(SAMPLE)).toStrictEqual(SAMPLE_PARSED);
  });

  test('the same events at every split point of the sample, and byte by byte', () => {
    const input = bytes(SAMPLE);
    for (const chunks of splits(input)) {
      const at = chunks.length === 2 ? `split at byte ${chunks[0]!.length}` : 'byte by byte';
      expect({ [at]: parse(chunks) }).toStrictEqual({ [at]: SAMPLE_PARSED });
    }
  });

  test('CRLF, LF and CR end lines alike, mixed in one stream', () => {
    const expected = [message('a\nb'), message('c')];
    for (const ending of ['\r\n', '\n', '\r']) {
      const text = `data: a${ending}data: b${ending}${ending}data: c${ending}${ending}`;
      expect({ [JSON.stringify(ending)]: whole(text).events }).toStrictEqual({ [JSON.stringify(ending)]: expected });
    }
    expect(whole('data: a\r\ndata: b\n\rdata: c\r\r\n').events).toStrictEqual(expected);
  });

  test('a CR ending one chunk and an LF starting the next are one line end, not a blank line', () => {
    expect(parse([bytes('data: a\r'), bytes('\ndata: b\r'), bytes('\n\r'), bytes('\n')]).events).toStrictEqual([
      message('a\nb'),
    ]);
    // A CR at a chunk's end still ends its line at once: the event is dispatched without waiting.
    const events: SseEvent[] = [];
    const reader = new SseReader({ event: (event) => events.push(event) });
    reader.push(bytes('data: now\r\r'));
    expect(events).toStrictEqual([message('now')]);
    reader.push(bytes('\ndata: next\n\n'));
    expect(events).toStrictEqual([message('now'), message('next')]);
  });

  test('CRLF line ends split anywhere, empty chunks between, mixed with LF ones: the same events, no extra blank line', () => {
    // Multi-line data, so that a CRLF read as two line ends would dispatch early (one event becomes two);
    // LF-only lines after CRLF ones, so that an LF skipped for a CR long gone would lose a line end.
    const input = bytes(
      [
        'data: one\r\n',
        'data: two\r\n',
        '\r\n',
        ': c\r\n',
        'event: x\r\n',
        'data: 3\n',
        '\n',
        'id: 9\r\n',
        'data: a\r\n',
        'data: b\r',
        '\n',
        'data: c\n',
        '\r\n',
        'data: d\n',
        '\n',
      ].join(''),
    );
    const expected: Parsed = {
      events: [
        message('one\ntwo'),
        { type: 'x', data: '3', lastEventId: '' },
        message('a\nb\nc', '9'),
        message('d', '9'),
      ],
      comments: ['c'],
      retries: [],
    };
    const empty = new Uint8Array(0);
    const ways: [string, Uint8Array[]][] = [
      ['whole', [input]],
      ...splits(input).map((chunks, i): [string, Uint8Array[]] => [
        i < input.length + 1 ? `split at ${i}` : 'byte by byte',
        chunks,
      ]),
      // An empty chunk after every byte: a CR's line end must survive a chunk that decodes to nothing.
      ['byte by byte, an empty chunk after each', Array.from(input).flatMap((byte) => [Uint8Array.of(byte), empty])],
    ];
    for (const [way, chunks] of ways) expect({ [way]: parse(chunks) }).toStrictEqual({ [way]: expected });
  });

  test('a BOM is skipped only at the start of the stream, even split across chunks', () => {
    const bom = bytes('\uFEFF');
    expect(bom).toStrictEqual(Uint8Array.of(0xef, 0xbb, 0xbf));
    const input = bytes('\uFEFFdata: x\n\n');
    expect(parse([input.slice(0, 1), input.slice(1, 2), input.slice(2)]).events).toStrictEqual([message('x')]);
    // Later, a BOM is an ordinary character: here it makes the field name unknown.
    expect(whole('data: x\n\n\uFEFFdata: y\n\n').events).toStrictEqual([message('x')]);
    // Only one is skipped.
    expect(whole('\uFEFF\uFEFFdata: z\n\n').events).toStrictEqual([]);
  });

  test('a multi-byte character split at each of its bytes is decoded once, whole', () => {
    const data = 'x\u00e9\u20ac\u{1F600}y'; // 2, 3 and 4 bytes in UTF-8
    const input = bytes(`data: ${data}\n\n`);
    for (const chunks of splits(input)) expect(parse(chunks).events).toStrictEqual([message(data)]);
  });

  test('invalid UTF-8 becomes U+FFFD, and a character cut off by the end of the stream too', () => {
    expect(whole(Uint8Array.of(...bytes('data: a'), 0xff, ...bytes('b\n\n'))).events).toStrictEqual([
      message('a\uFFFDb'),
    ]);
    const events: SseEvent[] = [];
    const reader = new SseReader({ event: (event) => events.push(event) });
    reader.push(Uint8Array.of(...bytes('data: a\n\ndata: b'), 0xf0, 0x9f));
    reader.end();
    expect(events).toStrictEqual([message('a')]); // the unfinished event is discarded
  });

  test('`field: value` loses exactly one space; a line without a colon is a field with an empty value', () => {
    expect(whole('data:x\n\ndata: x\n\ndata:  x\n\ndata:\n\ndata\n\n').events).toStrictEqual([
      message('x'),
      message('x'),
      message(' x'),
      message(''),
      message(''),
    ]);
    expect(whole('data\ndata\n\n').events).toStrictEqual([message('\n')]);
    expect(whole('event\ndata: typed with nothing\n\n').events).toStrictEqual([message('typed with nothing')]);
  });

  test('nothing is dispatched without data, and the type does not leak into the next event', () => {
    expect(whole('event: alone\n\n\n\ndata: next\n\n').events).toStrictEqual([message('next')]);
    expect(whole('event: a\ndata: 1\n\ndata: 2\n\n').events).toStrictEqual([
      { type: 'a', data: '1', lastEventId: '' },
      message('2'),
    ]);
  });

  test('comments: with and without the space, empty, and never events', () => {
    const parsed = whole(': keepalive\n:\n:  two\n::colon\n\n');
    expect(parsed.comments).toStrictEqual(['keepalive', '', ' two', ':colon']);
    expect(parsed.events).toStrictEqual([]);
  });

  test('id persists across events, an id with NUL is ignored, retry takes ASCII digits only, other fields are ignored', () => {
    const parsed = whole(
      'id: 1\ndata: a\n\ndata: b\n\nid: 2\u00003\ndata: c\n\nid\ndata: d\n\nretry: 12x\nretry: -5\nretry: 300\nfoo: bar\ndata: e\n\n',
    );
    expect(parsed.events.map((event) => [event.data, event.lastEventId])).toStrictEqual([
      ['a', '1'],
      ['b', '1'],
      ['c', '1'],
      ['d', ''],
      ['e', ''],
    ]);
    expect(parsed.retries).toStrictEqual([300]);
  });

  test('an event without its blank line at the end of the stream is discarded', () => {
    expect(whole('data: complete\n\ndata: incomplete\n').events).toStrictEqual([message('complete')]);
    expect(whole('data: complete\n\ndata: incomplete').events).toStrictEqual([message('complete')]);
  });

  test('a long line arriving in many chunks is read once whole', () => {
    const long = 'x'.repeat(200_000);
    const input = bytes(`data: ${long}\n\n`);
    const chunks: Uint8Array[] = [];
    for (let at = 0; at < input.length; at += 1000) chunks.push(input.slice(at, at + 1000));
    expect(parse(chunks).events).toStrictEqual([message(long)]);
  });

  describe('the bound on one event (maxEventLength)', () => {
    const MAX = 100;
    /** Feeds `chunks` to a reader bounded at MAX; the events it dispatched, and what it threw. */
    function bounded(chunks: readonly string[]): { events: string[]; thrown: unknown } {
      const events: string[] = [];
      const reader = new SseReader({ event: (event) => events.push(event.data) }, MAX);
      try {
        for (const chunk of chunks) reader.push(bytes(chunk));
        reader.end();
      } catch (error) {
        return { events, thrown: error };
      }
      return { events, thrown: undefined };
    }
    const tooLarge = expect.objectContaining({ name: 'SseEventTooLargeError', maxEventLength: MAX });

    test('an event of exactly the bound is read, whole or split anywhere; one character more is refused', () => {
      const fits = `data: ${'a'.repeat(60)}\ndata: ${'b'.repeat(39)}\n\n`; // 60 + \n + 39 = 100
      for (const chunks of splits(bytes(fits))) {
        const events: string[] = [];
        const reader = new SseReader({ event: (event) => events.push(event.data) }, MAX);
        for (const chunk of chunks) reader.push(chunk);
        expect(events).toStrictEqual([`${'a'.repeat(60)}\n${'b'.repeat(39)}`]);
      }
      const over = `data: ${'a'.repeat(60)}\ndata: ${'b'.repeat(40)}\n\n`;
      for (const at of [0, 30, 66, 80, over.length - 2, over.length]) {
        const { events, thrown } = bounded([over.slice(0, at), over.slice(at)]);
        expect({ at, events, thrown }).toStrictEqual({ at, events: [], thrown: tooLarge });
      }
      expect(bounded([over]).thrown).toBeInstanceOf(SseEventTooLargeError);
    });

    test('the events before the one too large are dispatched; the bound is per event, not per stream', () => {
      const small = `data: ${'x'.repeat(90)}\n\n`;
      expect(bounded([small.repeat(50)])).toStrictEqual({ events: Array(50).fill('x'.repeat(90)), thrown: undefined });
      expect(bounded([small, small, `data: ${'y'.repeat(101)}\n\n`, small])).toStrictEqual({
        events: ['x'.repeat(90), 'x'.repeat(90)],
        thrown: tooLarge,
      });
    });

    test('a line that never ends is refused once it is past the bound, whatever it is: data, comment or other field', () => {
      for (const start of ['data: ', ': ', 'foo: ', '']) {
        const chunks = Array.from({ length: 1000 }, (_, i) => (i === 0 ? start : 'z'.repeat(10)));
        const events: string[] = [];
        const reader = new SseReader({ event: (event) => events.push(event.data) }, MAX);
        let pushed = 0;
        let thrown: unknown;
        try {
          for (const chunk of chunks) {
            reader.push(bytes(chunk));
            pushed += 1;
          }
        } catch (error) {
          thrown = error;
        }
        expect({ start, thrown }).toStrictEqual({ start, thrown: tooLarge });
        // Refused within a chunk of the bound (the field name aside), not at the end of the stream.
        expect(pushed).toBeLessThanOrEqual(Math.ceil((MAX + 'data: '.length) / 10) + 1);
      }
    });

    test('counts characters, so an event of MAX bytes of multi-byte UTF-8 always fits', () => {
      const euros = '\u20ac'.repeat(33); // 99 bytes in UTF-8, 33 characters
      expect(bounded([`data: ${euros}\n\n`])).toStrictEqual({ events: [euros], thrown: undefined });
      const many = 'é'.repeat(100); // 200 bytes, 100 characters: within the bound too
      expect(bounded([`data: ${many}\n\n`])).toStrictEqual({ events: [many], thrown: undefined });
    });
  });
});
