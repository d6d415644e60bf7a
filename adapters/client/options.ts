/**
 * The client's argument checks, in the manner of the rest of the package and with its checks (from
 * lib/core.ts): each mistake throws an `OptionsError` with a code of its own, and a message naming the
 * field and the value received; an unknown key suggests the nearest known one.
 */
import { randomUUID } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  describeValue,
  durationMs,
  durationOrFalse,
  ErrorCode,
  given,
  isPlainObject,
  knownKeys,
  LATEST_PROTOCOL_VERSION,
  LISTEN_METHOD,
  oneOf,
  OptionsError,
  optionsObject,
  positiveInteger,
  positiveIntegerOrFalse,
  PROTOCOL_VERSION_META_KEY,
  TASKS_EXTENSION,
  type ErrorCodeValue,
  type RequestId,
} from '../../lib/internal.ts';
import type {
  FetchLike,
  ListenFilter,
  ListenOptions,
  OverflowPolicy,
  ReconnectOptions,
  WaitForOptions,
} from './types.ts';

/** The defaults, in one place. */
export const DEFAULTS = Object.freeze({
  maxBuffer: 100,
  maxEventBytes: 4 * 1024 * 1024,
  overflow: 'drop-oldest',
  ackTimeoutMs: 30_000,
  idleTimeoutMs: 45_000,
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  waitForTimeoutMs: 3000,
});

const OVERFLOW_POLICIES: readonly OverflowPolicy[] = ['drop-oldest', 'drop-newest', 'close'];

/** The request headers the client sets itself (lower-case): a caller's `headers` may not set them. */
const OWN_HEADERS: readonly string[] = ['content-type', 'accept', 'mcp-protocol-version', 'mcp-method'];

export const LISTEN_OPTION_KEYS: readonly string[] = Object.keys({
  headers: true,
  id: true,
  fetch: true,
  maxBuffer: true,
  maxEventBytes: true,
  overflow: true,
  signal: true,
  reconnect: true,
  clientCapabilities: true,
  ackTimeoutMs: true,
  idleTimeoutMs: true,
} satisfies { readonly [K in keyof Required<ListenOptions>]: true });

export const RECONNECT_OPTION_KEYS: readonly string[] = Object.keys({
  initialDelayMs: true,
  maxDelayMs: true,
  maxAttempts: true,
} satisfies { readonly [K in keyof Required<ReconnectOptions>]: true });

export const WAIT_FOR_OPTION_KEYS: readonly string[] = Object.keys({
  timeoutMs: true,
} satisfies { readonly [K in keyof Required<WaitForOptions>]: true });

/** Reconnection, resolved. */
export interface ResolvedReconnect {
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  readonly maxAttempts: number | false;
}

/** Everything one subscription needs, checked, with defaults applied. */
export interface ResolvedListen {
  readonly url: string;
  readonly id: RequestId;
  /** The request body, serialized once: every attempt sends the same bytes. */
  readonly body: string;
  /** The headers of one attempt: the caller's (re-read each time when a function), then the protocol's. */
  readonly headers: () => Promise<Record<string, string>>;
  readonly fetch: FetchLike;
  readonly maxBuffer: number;
  readonly maxEventBytes: number;
  readonly overflow: OverflowPolicy;
  readonly signal: AbortSignal | undefined;
  readonly reconnect: ResolvedReconnect | false;
  readonly ackTimeoutMs: number | false;
  readonly idleTimeoutMs: number | false;
}

function fail(code: ErrorCodeValue, message: string): never {
  throw new OptionsError(code, message);
}

/** The URL, absolute, `http:` or `https:`. */
function checkUrl(value: unknown): string {
  let url: URL | undefined;
  if (value instanceof URL) url = value;
  else if (typeof value === 'string' && URL.canParse(value)) url = new URL(value);
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    fail(
      ErrorCode.InvalidUrl,
      `Expected the URL of listen() to be an absolute http: or https: URL, got ${describeValue(value)}`,
    );
  }
  return url.href;
}

/** The filter: an object whose known fields have their types; fields of later revisions pass as they are. */
function checkFilter(value: unknown): ListenFilter {
  if (!isPlainObject(value))
    fail(ErrorCode.InvalidFilter, `Expected the filter of listen() to be an object, got ${describeValue(value)}`);
  for (const flag of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) {
    const flagValue = value[flag];
    if (flagValue !== undefined && typeof flagValue !== 'boolean') {
      fail(ErrorCode.InvalidFilter, `Expected \`filter.${flag}\` to be a boolean, got ${describeValue(flagValue)}`);
    }
  }
  for (const list of ['resourceSubscriptions', 'taskIds'] as const) {
    const items = value[list];
    if (items === undefined) continue;
    if (!Array.isArray(items))
      fail(
        ErrorCode.InvalidFilter,
        `Expected \`filter.${list}\` to be an array of strings, got ${describeValue(items)}`,
      );
    const wrong = (items as unknown[]).findIndex((item) => typeof item !== 'string');
    if (wrong !== -1) {
      fail(
        ErrorCode.InvalidFilter,
        `Expected \`filter.${list}[${wrong}]\` to be a string, got ${describeValue(items[wrong])}`,
      );
    }
  }
  return value;
}

/** Headers: an object of strings that leaves the protocol's own headers to the client. */
export function checkHeaders(value: unknown, name = '`headers`'): Record<string, string> {
  if (!isPlainObject(value))
    fail(ErrorCode.InvalidHeaders, `Expected ${name} to be an object of strings, got ${describeValue(value)}`);
  const headers: Record<string, string> = {};
  for (const [key, header] of Object.entries(value)) {
    if (typeof header !== 'string') {
      fail(
        ErrorCode.InvalidHeaders,
        `Expected header \`${key}\` of ${name} to be a string, got ${describeValue(header)}`,
      );
    }
    const lower = key.toLowerCase();
    if (OWN_HEADERS.includes(lower)) {
      fail(ErrorCode.InvalidHeaders, `${name} may not set \`${key}\`: listen() sets it from the request it sends`);
    }
    headers[lower] = header;
  }
  return headers;
}

function checkId(value: unknown): RequestId {
  if (value === undefined) return `listen-${randomUUID()}`;
  if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) return value;
  return fail(
    ErrorCode.InvalidRequestId,
    `Expected \`id\` to be a string or a finite number, got ${describeValue(value)}`,
  );
}

function checkSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  return fail(ErrorCode.InvalidSignal, `Expected \`signal\` to be an AbortSignal, got ${describeValue(value)}`);
}

function checkReconnect(value: unknown): ResolvedReconnect | false {
  if (value === undefined || value === false) return false;
  if (value !== true) optionsObject(value, '`reconnect`');
  const supplied: ReconnectOptions = value === true ? {} : value;
  knownKeys(supplied, RECONNECT_OPTION_KEYS, 'listen() `reconnect`');
  const initialDelayMs = durationMs(
    'reconnect.initialDelayMs',
    given(supplied.initialDelayMs, DEFAULTS.initialDelayMs),
  );
  const maxDelayMs = durationMs('reconnect.maxDelayMs', given(supplied.maxDelayMs, DEFAULTS.maxDelayMs));
  if (initialDelayMs > maxDelayMs) {
    fail(
      ErrorCode.ConflictingOptions,
      `Expected \`reconnect.initialDelayMs\` (${initialDelayMs}) to be at most \`reconnect.maxDelayMs\` (${maxDelayMs})`,
    );
  }
  const maxAttempts = positiveIntegerOrFalse('reconnect.maxAttempts', given(supplied.maxAttempts, false));
  return Object.freeze({ initialDelayMs, maxDelayMs, maxAttempts });
}

/** The client capabilities, with the Tasks extension declared when the filter asks for `taskIds`. */
function capabilitiesFor(filter: ListenFilter, value: unknown): Record<string, unknown> {
  if (value !== undefined) optionsObject(value, '`clientCapabilities`');
  const capabilities: Record<string, unknown> = { ...value };
  if (filter.taskIds === undefined) return capabilities;
  const extensions = capabilities.extensions;
  if (extensions !== undefined && !isPlainObject(extensions)) {
    fail(
      ErrorCode.OptionsNotObject,
      `Expected \`clientCapabilities.extensions\` to be an object, got ${describeValue(extensions)}`,
    );
  }
  if (extensions?.[TASKS_EXTENSION] === undefined) capabilities.extensions = { ...extensions, [TASKS_EXTENSION]: {} };
  return capabilities;
}

/**
 * Checks `listen()`'s arguments and applies the defaults. Throws an `OptionsError` for the first
 * mistake; never mutates what it was given.
 */
export function resolveListen(url: unknown, filter: unknown, options: unknown): ResolvedListen {
  const href = checkUrl(url);
  const checkedFilter = checkFilter(filter);
  if (options === undefined) options = {};
  optionsObject(options, 'the options of listen()');
  knownKeys(options, LISTEN_OPTION_KEYS, 'listen()');
  const supplied = options as ListenOptions & Record<string, unknown>;

  const id = checkId(supplied.id);
  const fetchOption = supplied.fetch ?? globalThis.fetch;
  if (typeof fetchOption !== 'function') {
    fail(ErrorCode.NotFunction, `Expected \`fetch\` to be a function, got ${describeValue(supplied.fetch)}`);
  }
  const headerOption = supplied.headers;
  let headers: () => Promise<Record<string, string>>;
  if (typeof headerOption === 'function') {
    headers = async () => checkHeaders(await headerOption(), 'the headers that `headers()` returned');
  } else {
    const fixed = headerOption === undefined ? {} : checkHeaders(headerOption);
    headers = () => Promise.resolve({ ...fixed });
  }
  const maxBuffer = positiveInteger('maxBuffer', given(supplied.maxBuffer, DEFAULTS.maxBuffer));
  const maxEventBytes = positiveInteger('maxEventBytes', given(supplied.maxEventBytes, DEFAULTS.maxEventBytes));
  const overflow = oneOf('overflow', given(supplied.overflow, DEFAULTS.overflow), OVERFLOW_POLICIES);
  const signal = checkSignal(supplied.signal);
  const reconnect = checkReconnect(supplied.reconnect);
  const ackTimeoutMs = durationOrFalse('ackTimeoutMs', given(supplied.ackTimeoutMs, DEFAULTS.ackTimeoutMs));
  const idleTimeoutMs = durationOrFalse('idleTimeoutMs', given(supplied.idleTimeoutMs, DEFAULTS.idleTimeoutMs));

  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: LISTEN_METHOD,
    params: {
      _meta: {
        [PROTOCOL_VERSION_META_KEY]: LATEST_PROTOCOL_VERSION,
        [CLIENT_CAPABILITIES_META_KEY]: capabilitiesFor(checkedFilter, supplied.clientCapabilities),
      },
      notifications: checkedFilter,
    },
  });
  return Object.freeze({
    url: href,
    id,
    body,
    headers,
    fetch: fetchOption,
    maxBuffer,
    maxEventBytes,
    overflow: overflow,
    signal,
    reconnect,
    ackTimeoutMs,
    idleTimeoutMs,
  });
}

/** Checks `waitFor()`'s arguments. */
export function resolveWaitFor(match: unknown, options: unknown): { timeoutMs: number | false } {
  if (typeof match !== 'string' && typeof match !== 'function') {
    fail(
      ErrorCode.NotFunction,
      `Expected what waitFor() waits for to be a method name or a predicate, got ${describeValue(match)}`,
    );
  }
  if (options === undefined) return { timeoutMs: DEFAULTS.waitForTimeoutMs };
  optionsObject(options, 'the options of waitFor()');
  knownKeys(options, WAIT_FOR_OPTION_KEYS, 'waitFor()');
  const { timeoutMs } = options as WaitForOptions;
  return { timeoutMs: durationOrFalse('timeoutMs', given(timeoutMs, DEFAULTS.waitForTimeoutMs)) };
}

/** The protocol's own headers of every attempt, after the caller's. */
export function requestHeaders(caller: Record<string, string>): Record<string, string> {
  return {
    ...caller,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
    'mcp-method': LISTEN_METHOD,
  };
}
