/**
 * One listen attempt: POSTs the request with `fetch`, checks the answer, reads the event stream as it
 * arrives, settles on the acknowledgement (or on why there was none), then hands every later message
 * to its owner until the stream ends. A subscription makes one per (re-)listen.
 */
import {
  ACK_METHOD,
  ErrorCode,
  isPlainObject,
  SUBSCRIPTION_ID_META_KEY,
  type NotificationFilter,
  type RequestId,
} from '../../lib/internal.ts';
import { ListenError, type ListenErrorCode } from './errors.ts';
import { requestHeaders, type ResolvedListen } from './options.ts';
import { parseRetryAfter } from './retry.ts';
import { SseEventTooLargeError, SseReader } from './sse-reader.ts';
import type { FetchResponse, JsonRpcNotification } from './types.ts';

/** Most bytes of an error answer read, for its message and `error.body`: a refusal is short. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** How long the rest of a response is read after its terminal result before it is cut (a server ends it at once). */
const DRAIN_MS = 1000;

/** What a connection tells its owner, synchronously, in the stream's order. */
export interface ConnectionEvents {
  /** The acknowledgement: called before any notification that came after it (in the same chunk or not). */
  ack(honored: NotificationFilter): void;
  /** A JSON-RPC notification after the acknowledgement. */
  notification(message: JsonRpcNotification): void;
  /**
   * The stream is over after its acknowledgement: with the terminal result (`'complete'`) or without
   * (`'lost'`, with what broke it when known). Called at most once, and never after `close()`.
   */
  end(reason: 'complete' | 'lost', cause?: unknown): void;
}

/** One attempt, from the moment it is made. */
export interface Connection {
  /** Resolves with the honoured filter once the acknowledgement arrived; rejects with a `ListenError`. */
  readonly acknowledged: Promise<NotificationFilter>;
  /** Aborts the request or the stream; no event follows. Idempotent. */
  close(): void;
}

type State = 'awaiting-ack' | 'open' | 'done';

type RefusalInit = Pick<ListenError, 'status' | 'rpcCode' | 'data' | 'retryAfterMs' | 'body'>;

function listenError(
  code: ListenErrorCode,
  message: string,
  id: RequestId,
  details: Partial<RefusalInit> & { cause?: unknown } = {},
) {
  return new ListenError(code, message, { id, ...details });
}

/** The JSON-RPC error of a parsed body, when it is one. */
function rpcError(message: unknown): { code: number; message: string; data: unknown } | undefined {
  if (!isPlainObject(message) || !isPlainObject(message.error)) return undefined;
  const { code, message: text, data } = message.error;
  if (typeof code !== 'number') return undefined;
  return { code, message: typeof text === 'string' ? text : '', data };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A short, one-line excerpt of a body for a message. */
function excerpt(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/** Reads at most {@link MAX_ERROR_BODY_BYTES} of a body as text, then lets the rest go. */
async function readBounded(response: FetchResponse): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value === undefined) continue;
    bytes += value.byteLength;
    text += decoder.decode(value, { stream: true });
    if (bytes >= MAX_ERROR_BODY_BYTES) {
      await reader.cancel().catch(() => {});
      break;
    }
  }
  return text + decoder.decode();
}

function describeStatus(response: FetchResponse): string {
  return `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
}

/** The refusal an answer that is not a stream stands for. */
async function refusal(request: ResolvedListen, response: FetchResponse): Promise<ListenError> {
  const body = await readBounded(response);
  const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
  const error = rpcError(parseJson(body));
  const status = describeStatus(response);
  if (error !== undefined) {
    return listenError(
      ErrorCode.ListenRefused,
      `listen was refused: ${status}, JSON-RPC ${error.code} ${JSON.stringify(error.message)}`,
      request.id,
      { status: response.status, rpcCode: error.code, data: error.data, retryAfterMs, body },
    );
  }
  const shown = excerpt(body);
  return listenError(
    ErrorCode.ListenRefused,
    `listen was refused: ${status}${shown === '' ? '' : `: ${shown}`}`,
    request.id,
    {
      status: response.status,
      retryAfterMs,
      body,
    },
  );
}

/**
 * Makes one attempt. The request goes out at once; `events` hears of the stream from its
 * acknowledgement on, `acknowledged` of how it started. `signal` (the subscription's) aborts it.
 */
export function openConnection(request: ResolvedListen, events: ConnectionEvents, signal: AbortSignal): Connection {
  const { id } = request;
  const controller = new AbortController();
  let state: State = 'awaiting-ack';
  let draining: ReturnType<typeof setTimeout> | undefined;
  /** After the acknowledgement: cuts a stream silent for `idleTimeoutMs`; refreshed by every chunk. */
  let idle: ReturnType<typeof setTimeout> | undefined;
  /** The response's status once it came, and whether its body has been read to its end (or broke). */
  let status: number | undefined;
  let bodyOver = false;
  let timedOut = false;
  let resolveAck!: (honored: NotificationFilter) => void;
  let rejectAck!: (error: ListenError) => void;
  const acknowledged = new Promise<NotificationFilter>((resolve, reject) => {
    resolveAck = resolve;
    rejectAck = reject;
  });

  const onAbort = (): void => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  const timer =
    request.ackTimeoutMs === false
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, request.ackTimeoutMs);

  /** Why the attempt stopped before its acknowledgement: the abort and the timeout explain any failure they caused. */
  const failure = (error: ListenError): ListenError => {
    if (signal.aborted) {
      return listenError(ErrorCode.ListenAborted, 'listen was aborted before its acknowledgement', id, {
        cause: signal.reason,
      });
    }
    if (timedOut) {
      return listenError(
        ErrorCode.ListenAckTimeout,
        `no acknowledgement within ${String(request.ackTimeoutMs)} ms (ackTimeoutMs)`,
        id,
      );
    }
    return error;
  };

  const settle = (): void => {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  };

  /** Ends the attempt before its acknowledgement. */
  const reject = (error: ListenError): void => {
    if (state !== 'awaiting-ack') return;
    state = 'done';
    settle();
    controller.abort();
    rejectAck(failure(error));
  };

  /** Ends the stream after its acknowledgement. */
  const end = (reason: 'complete' | 'lost', cause?: unknown): void => {
    if (state !== 'open') return;
    state = 'done';
    clearTimeout(idle);
    signal.removeEventListener('abort', onAbort);
    // The rest of the response is read (and dropped) until the server ends it, so that its connection
    // goes back to the pool as HTTP means it to. Aborting instead would leave Node's fetch with a spare
    // connection that no request ever uses (nodejs/undici#5845), holding up the server's graceful
    // shutdown. A server that keeps the response open after its result is cut off after DRAIN_MS.
    if (!bodyOver) {
      draining = setTimeout(() => controller.abort(), DRAIN_MS);
      draining.unref();
    }
    events.end(reason, cause);
  };

  const onMessage = (data: string): void => {
    const message = parseJson(data);
    if (state === 'awaiting-ack') {
      acknowledge(message);
      return;
    }
    if (state !== 'open' || !isPlainObject(message)) return; // after the ack, what is not JSON is skipped
    if (typeof message.method === 'string' && message.id === undefined) {
      events.notification(message as unknown as JsonRpcNotification);
    } else if (message.id === id && message.method === undefined) {
      // The terminal result; or an error, which the protocol does not define after the ack: the stream is over.
      end(message.result !== undefined ? 'complete' : 'lost', message.error);
    }
    // A request on a listen stream (spec §3: never sent) is skipped.
  };

  const acknowledge = (message: unknown): void => {
    const error = rpcError(message);
    if (error !== undefined) {
      reject(
        listenError(
          ErrorCode.ListenRefused,
          `listen was refused: JSON-RPC ${error.code} ${JSON.stringify(error.message)}`,
          id,
          {
            status,
            rpcCode: error.code,
            data: error.data,
          },
        ),
      );
      return;
    }
    const invalid = (why: string): void =>
      reject(listenError(ErrorCode.ListenInvalidAck, `invalid acknowledgement: ${why}`, id));
    if (!isPlainObject(message)) {
      invalid('the first message of the stream is not a JSON object');
      return;
    }
    if (message.method !== ACK_METHOD) {
      const got =
        typeof message.method === 'string' ? message.method : message.result !== undefined ? 'a result' : 'no method';
      invalid(`expected \`${ACK_METHOD}\` first, got ${got}`);
      return;
    }
    const params = isPlainObject(message.params) ? message.params : {};
    const meta = isPlainObject(params._meta) ? params._meta : {};
    const subscriptionId = meta[SUBSCRIPTION_ID_META_KEY];
    if (subscriptionId !== id) {
      invalid(`its subscription id is ${JSON.stringify(subscriptionId) ?? 'missing'}, expected ${JSON.stringify(id)}`);
      return;
    }
    if (!isPlainObject(params.notifications)) {
      invalid('`params.notifications` is not an object');
      return;
    }
    const honored = freezeFilter(params.notifications);
    state = 'open';
    clearTimeout(timer);
    const { idleTimeoutMs } = request;
    if (idleTimeoutMs !== false) {
      idle = setTimeout(() => {
        // No FIN or reset came, yet nothing did either: the server, or the path to it, is gone.
        controller.abort();
        end(
          'lost',
          listenError(
            ErrorCode.ListenIdleTimeout,
            `the stream sent nothing, not even a keepalive, for ${String(idleTimeoutMs)} ms (idleTimeoutMs)`,
            id,
            { status },
          ),
        );
      }, idleTimeoutMs);
      idle.unref();
    }
    // The owner learns of the ack before any notification parsed after it, in this chunk or a later one.
    events.ack(honored);
    resolveAck(honored);
  };

  const reader = new SseReader(
    {
      event: (event) => {
        if (event.type === 'message') onMessage(event.data);
      },
    },
    request.maxEventBytes,
  );

  /** An event past `maxEventBytes`: the stream cannot be read on, so it ends (before the ack: the attempt fails). */
  const tooLarge = (error: SseEventTooLargeError, status: number): void => {
    controller.abort();
    const which = state === 'awaiting-ack' ? 'the first event of the stream' : 'an event of the stream';
    const failed = listenError(
      ErrorCode.ListenEventTooLarge,
      `${which} exceeds maxEventBytes (${String(error.maxEventLength)})`,
      id,
      { status, cause: error },
    );
    reject(failed);
    end('lost', failed);
  };

  const run = async (): Promise<void> => {
    if (signal.aborted) {
      reject(listenError(ErrorCode.ListenAborted, 'listen was aborted before it was sent', id));
      return;
    }
    let headers: Record<string, string>;
    try {
      headers = requestHeaders(await request.headers());
    } catch (error) {
      // The caller's headers() failed, or returned what headers may not be: a failure of this attempt.
      reject(listenError(ErrorCode.ListenFailed, `headers() failed: ${messageOf(error)}`, id, { cause: error }));
      return;
    }
    let response: FetchResponse;
    try {
      response = await request.fetch(request.url, {
        method: 'POST',
        headers,
        body: request.body,
        signal: controller.signal,
      });
    } catch (error) {
      const cause = (error as { cause?: unknown }).cause ?? error;
      reject(
        listenError(ErrorCode.ListenFailed, `listen could not reach ${request.url}: ${messageOf(cause)}`, id, {
          cause: error,
        }),
      );
      return;
    }
    status = response.status;
    try {
      const type = (response.headers.get('content-type') ?? '').toLowerCase();
      if (response.status < 200 || response.status > 299 || type.startsWith('application/json')) {
        // A JSON answer with a 200 is an in-band refusal (the SDK answers capacity so); anything else is no stream.
        const refused = await refusal(request, response);
        reject(
          response.status >= 200 && response.status <= 299 && refused.rpcCode === undefined
            ? listenError(
                ErrorCode.ListenInvalidAck,
                `expected an event stream, got JSON: ${excerpt(refused.body ?? '')}`,
                id,
                {
                  status: response.status,
                  body: refused.body,
                },
              )
            : refused,
        );
        return;
      }
      if (!type.startsWith('text/event-stream') || response.body === null) {
        await response.body
          ?.getReader()
          .cancel()
          .catch(() => {});
        reject(
          listenError(
            ErrorCode.ListenInvalidAck,
            `expected a text/event-stream answer, got ${describeStatus(response)} ${type === '' ? 'without a Content-Type' : type}`,
            id,
            { status: response.status },
          ),
        );
        return;
      }
      const body = response.body.getReader();
      try {
        for (;;) {
          const { done, value } = await body.read();
          if (done) break;
          if (state === 'done' || value === undefined) continue;
          idle?.refresh();
          reader.push(value);
        }
      } finally {
        bodyOver = true;
        clearTimeout(draining);
      }
      reader.end();
      reject(
        listenError(ErrorCode.ListenEndedBeforeAck, 'the stream ended before its acknowledgement', id, {
          status: response.status,
        }),
      );
      end('lost');
    } catch (error) {
      if (error instanceof SseEventTooLargeError) {
        tooLarge(error, response.status);
        return;
      }
      reject(
        listenError(
          ErrorCode.ListenEndedBeforeAck,
          `the stream broke before its acknowledgement: ${messageOf(error)}`,
          id,
          {
            status: response.status,
            cause: error,
          },
        ),
      );
      end('lost', error);
    }
  };
  void run();

  return {
    acknowledged,
    close() {
      if (state === 'awaiting-ack') {
        reject(listenError(ErrorCode.ListenAborted, 'listen was closed before its acknowledgement', id));
        return;
      }
      state = 'done';
      clearTimeout(idle);
      signal.removeEventListener('abort', onAbort);
      controller.abort();
    },
  };
}

function messageOf(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && !error.message.includes(code) ? `${code} ${error.message}` : error.message;
  }
  return String(error);
}

/** The honoured filter as the caller keeps it: frozen, lists included. */
function freezeFilter(filter: Record<string, unknown>): NotificationFilter {
  for (const value of Object.values(filter)) if (Array.isArray(value)) Object.freeze(value);
  return Object.freeze(filter);
}
