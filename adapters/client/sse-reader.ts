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
  #type = '';
  #lastEventId = '';

  constructor(handlers: SseHandlers) {
    this.#handlers = handlers;
  }

  /** Parses the next bytes of the stream; handlers run before it returns. */
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
    this.#type = '';
    if (data.length === 0) return;
    this.#handlers.event({
      type: type === '' ? 'message' : type,
      data: data.join('\n'),
      lastEventId: this.#lastEventId,
    });
  }
}
