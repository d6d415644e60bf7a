/**
 * The SSE reader of the bench's load generator and of the soak's clients: it splits a response body
 * into events as its chunks arrive, and stamps each event with its chunk's arrival time.
 *
 * Written for speed, because the bench measures the server and the reader must never be what limits
 * it: when it only counts (the bench) it scans the bytes (`Buffer.indexOf`) and allocates nothing per
 * event; when it hands on each event's data (the soak checks every message) it decodes each chunk
 * once and slices the values out of that text. It is not the library's own client parser
 * (adapters/client/sse-reader.ts): the bench and the soak judge the library from outside.
 *
 * What it reads: lines end with LF (every server under test writes LF only); a frame is a run of lines
 * ended by an empty line; a frame with a `data` line (the only field that begins with `d`) is an
 * event, and one of comments only (`: keepalive`) is skipped. A frame the connection closed inside is
 * no event. An event's data is its `data` lines' values (after `data:` and one space), joined by LF.
 */
import { StringDecoder } from 'node:string_decoder';
import { now } from './clock.ts';

const LF = 0x0a;
const SPACE = 0x20;
const LOWER_D = 0x64;
const DATA_FIELD = 'data:'.length;

export interface SseReaderOptions {
  /**
   * Called, synchronously, with every event: its data (`''` unless {@link data}) and the arrival time
   * of the chunk that completed it ({@link now}). `events` already counts it.
   */
  readonly onEvent?: (data: string, at: number) => void;
  /**
   * Whether to decode each event's data for {@link onEvent}; without it the reader only counts.
   * @default false
   */
  readonly data?: boolean;
}

/** One SSE response body, fed chunk by chunk. */
export class SseReader {
  /** Events read: frames with data, the first (a listen's acknowledgement) included. */
  events = 0;
  bytes = 0;
  /** Chunks fed (one per socket read that the HTTP parser turned into body): events per chunk show batching. */
  chunks = 0;
  /** When the last chunk arrived ({@link now}); 0 before the first. */
  lastAt = 0;
  onEvent: ((data: string, at: number) => void) | undefined;
  /** Set when each event's data is decoded. */
  private readonly decoder: StringDecoder | undefined;
  private lineStart = true;
  private hasData = false;
  /** Inside a `data` line (when decoding). */
  private inData = false;
  /** The current `data` line's text in the chunks before this one (a line split across reads). */
  private partial = '';
  /** The current frame's data so far; `undefined` before its first `data` line. */
  private frameData: string | undefined;

  constructor(options: SseReaderOptions = {}) {
    this.onEvent = options.onEvent;
    this.decoder = options.data === true ? new StringDecoder('utf8') : undefined;
  }

  feed(chunk: Buffer): void {
    const at = now();
    this.lastAt = at;
    this.bytes += chunk.length;
    this.chunks++;
    if (this.decoder === undefined) this.count(chunk, at);
    else this.read(this.decoder.write(chunk), at);
  }

  /** Counting: the bytes are scanned, nothing is allocated. */
  private count(chunk: Buffer, at: number): void {
    const length = chunk.length;
    let pos = 0;
    for (;;) {
      if (this.lineStart) {
        if (pos >= length) break;
        const first = chunk[pos];
        if (first === LF) {
          // An empty line ends the frame.
          if (this.hasData) this.dispatch(at);
          pos++;
          continue;
        }
        if (first === LOWER_D) this.hasData = true;
        this.lineStart = false;
      }
      const newline = chunk.indexOf(LF, pos);
      if (newline === -1) break;
      pos = newline + 1;
      this.lineStart = true;
    }
  }

  /**
   * Decoding: the chunk is decoded once (a character split across chunks waits for the next), and
   * each `data` value is a slice of that text, which V8 makes without copying.
   */
  private read(text: string, at: number): void {
    const length = text.length;
    let pos = 0;
    for (;;) {
      if (this.lineStart) {
        if (pos >= length) break;
        const first = text.charCodeAt(pos);
        if (first === LF) {
          if (this.hasData) this.dispatch(at);
          pos++;
          continue;
        }
        if (first === LOWER_D) {
          this.hasData = true;
          this.inData = true;
        }
        this.lineStart = false;
      }
      const newline = text.indexOf('\n', pos);
      if (newline === -1) {
        if (this.inData) this.partial += text.slice(pos);
        break;
      }
      if (this.inData) {
        this.inData = false;
        if (this.partial === '') this.data(text, pos, newline);
        else {
          const line = this.partial + text.slice(pos, newline);
          this.partial = '';
          this.data(line, 0, line.length);
        }
      }
      pos = newline + 1;
      this.lineStart = true;
    }
  }

  /** The `data` line `line.slice(start, end)`: its value after `data:` and one space. */
  private data(line: string, start: number, end: number): void {
    let from = Math.min(end, start + DATA_FIELD);
    if (from < end && line.charCodeAt(from) === SPACE) from++;
    const value = line.slice(from, end);
    this.frameData = this.frameData === undefined ? value : `${this.frameData}\n${value}`;
  }

  private dispatch(at: number): void {
    const data = this.frameData ?? '';
    this.hasData = false;
    this.frameData = undefined;
    this.events++;
    this.onEvent?.(data, at);
  }
}
