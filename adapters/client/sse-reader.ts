/**
 * An incremental `text/event-stream` parser: the WHATWG HTML standard's "event stream interpretation"
 * (§9.2.6), fed the body's bytes as they arrive, split anywhere (inside a line, between a CR and its
 * LF, inside a multi-byte character).
 *
 * - Bytes are decoded as UTF-8 in stream mode, so a character split across chunks is decoded once
 *   whole; invalid sequences become U+FFFD; one byte order mark at the very start is skipped.
 * - A line ends at CRLF, LF or CR. A CR that ends a chunk ends its line at once; an LF that then starts
 *   the next chunk belongs to that same line end and is skipped.
 * - A line starting with `:` is a comment; `field: value` loses one optional space after the colon; a
 *   line without a colon is a field with an empty value. `data` lines are joined with `\n`; `event`
 *   names the type; `id` (unless it holds a NUL) sets the last event id; `retry` (ASCII digits only)
 *   the reconnection time; any other field is ignored.
 * - A blank line dispatches the event, unless no `data` line came since the last one (then the type
 *   is reset and nothing is dispatched). At the end of the stream an event without its blank line is
 *   discarded.
 *
 * What the standard leaves unbounded is bounded here: the event being gathered (its `data` lines, with
 * the `\n` between them) and the line still unfinished may together hold at most `maxEventLength` UTF-16
 * code units; past it, `push()` throws {@link SseEventTooLargeError}, so that a server can never grow a
 * reader's memory without end (one line that never ends, or `data` lines that never meet a blank one).
 * A character never takes more code units than UTF-8 bytes, so an event of that many bytes always fits.
 */

/** One dispatched event. */
export interface SseEvent {
  /** The `event` field, or `'message'` when the event had none. */
  readonly type: string;
  /** The `data` lines, joined with `\n`. */
  readonly data: string;
  /** The last event id in effect (`id` fields persist across events); `''` when none was set. */
  readonly lastEventId: string;
}

/** What a {@link SseReader} calls, synchronously, as it parses. */
export interface SseHandlers {
  /** An event was dispatched. */
  event(event: SseEvent): void;
  /** A comment line (`: keepalive` gives `'keepalive'`: the one optional space is removed). */
  comment?(text: string): void;
  /** A valid `retry` field: the reconnection time the server asks for, in milliseconds. */
  retry?(ms: number): void;
}

/** An event, or a line, longer than the reader's bound: the stream can no longer be read. */
export class SseEventTooLargeError extends Error {
  constructor(readonly maxEventLength: number) {
    super(`an event of the stream exceeds ${String(maxEventLength)} characters`);
    this.name = 'SseEventTooLargeError';
  }
}

/** What starts a `data` line. */
const DATA_FIELD = 'data: ';
const LF = 0x0a;
const CR = 0x0d;

export class SseReader {
  readonly #handlers: SseHandlers;
  /** `fatal: false`: invalid UTF-8 becomes U+FFFD; `ignoreBOM: false`: a leading BOM is skipped. */
  readonly #decoder = new TextDecoder('utf-8');
  /** The unfinished line carried over from earlier chunks: it holds no CR and no LF. */
  #line = '';
  /** The last line ended with a CR at the very end of a chunk: an LF that comes next is part of it. */
  #afterCr = false;
  #data: string[] = [];
  /** Code units the `data` lines gathered so far take, a `\n` counted after each. */
  #dataLength = 0;
  #type = '';
  #lastEventId = '';
  readonly #maxEventLength: number;

  constructor(handlers: SseHandlers, maxEventLength = Number.POSITIVE_INFINITY) {
    this.#handlers = handlers;
    this.#maxEventLength = maxEventLength;
  }

  /**
   * Parses the next bytes of the stream; handlers run before it returns. Throws
   * {@link SseEventTooLargeError} once the event being gathered exceeds the bound (the events before
   * it were dispatched); the reader is then of no further use.
   */
  push(chunk: Uint8Array): void {
    this.#lines(this.#decoder.decode(chunk, { stream: true }));
  }

  /**
   * The stream is over: decodes what the decoder still holds (a truncated character becomes U+FFFD),
   * then discards the unfinished line and the undispatched event, as the standard says.
   */
  end(): void {
    this.#lines(this.#decoder.decode());
    this.#line = '';
    this.#data = [];
    this.#dataLength = 0;
    this.#type = '';
  }

  #lines(decoded: string): void {
    if (decoded === '') return;
    let start = 0;
    if (this.#afterCr) {
      this.#afterCr = false;
      if (decoded.charCodeAt(0) === LF) start = 1;
    }
    // The carried line holds no line break: search the new text only.
    const carried = this.#line;
    const text = carried === '' ? decoded : carried + decoded;
    let from = carried.length + start;
    let lineStart = carried === '' ? start : 0;
    let cr = text.indexOf('\r', from);
    let lf = text.indexOf('\n', from);
    while (cr !== -1 || lf !== -1) {
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      this.#field(text.slice(lineStart, end));
      from = end + 1;
      if (text.charCodeAt(end) === CR) {
        if (from === text.length) this.#afterCr = true;
        else if (text.charCodeAt(from) === LF) from += 1;
      }
      lineStart = from;
      if (cr !== -1 && cr < from) cr = text.indexOf('\r', from);
      if (lf !== -1 && lf < from) lf = text.indexOf('\n', from);
    }
    this.#line = lineStart === 0 ? text : text.slice(lineStart);
    // The unfinished line may yet be a `data` line: its field name is not part of the event.
    if (this.#line.length - DATA_FIELD.length + this.#dataLength > this.#maxEventLength) this.#tooLarge();
  }

  #tooLarge(): never {
    // Nothing of it is kept: the caller ends the stream.
    this.#line = '';
    this.#data = [];
    this.#dataLength = 0;
    throw new SseEventTooLargeError(this.#maxEventLength);
  }

  #field(line: string): void {
    if (line === '') {
      this.#dispatch();
      return;
    }
    const colon = line.indexOf(':');
    if (colon === 0) {
      this.#handlers.comment?.(line.charCodeAt(1) === 0x20 ? line.slice(2) : line.slice(1));
      return;
    }
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    switch (name) {
      case 'data':
        this.#dataLength += value.length + 1;
        if (this.#dataLength - 1 > this.#maxEventLength) this.#tooLarge();
        this.#data.push(value);
        break;
      case 'event':
        this.#type = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.#lastEventId = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.#handlers.retry?.(Number(value));
        break;
      default:
      // Other fields are ignored (§9.2.6).
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const type = this.#type;
    this.#data = [];
    this.#dataLength = 0;
    this.#type = '';
    if (data.length === 0) return;
    this.#handlers.event({
      type: type === '' ? 'message' : type,
      data: data.join('\n'),
      lastEventId: this.#lastEventId,
    });
  }
}
