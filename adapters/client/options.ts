/**
 * The client's argument checks, in the manner of the rest of the package: each mistake throws an
 * `OptionsError` with a code of its own, and a message naming the field and the value received.
 * lib/validate.ts does this for the engine behind lib's internal door; the client reaches lib through
 * its public door only, so it keeps these few checks of its own.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, OptionsError, type ErrorCodeValue, type RequestId } from '../../lib/index.ts';
import type { FetchLike, ListenFilter, ListenOptions, ReconnectOptions, WaitForOptions } from './types.ts';
import {
  CLIENT_CAPABILITIES_META_KEY,
  isPlainObject,
  LISTEN_METHOD,
  OWN_HEADERS,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_META_KEY,
  TASKS_EXTENSION,
} from './wire.ts';

/** The longest delay Node's timers honour. */
export const MAX_TIMER_MS = 2_147_483_647;

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

const OVERFLOW_POLICIES = ['drop-oldest', 'drop-newest', 'close'] as const;

const LISTEN_OPTION_KEYS: readonly string[] = Object.keys({
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

const RECONNECT_OPTION_KEYS: readonly string[] = Object.keys({
  initialDelayMs: true,
  maxDelayMs: true,
  maxAttempts: true,
} satisfies { readonly [K in keyof Required<ReconnectOptions>]: true });

const WAIT_FOR_OPTION_KEYS: readonly string[] = Object.keys({
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
  readonly overflow: (typeof OVERFLOW_POLICIES)[number];
  readonly signal: AbortSignal | undefined;
  readonly reconnect: ResolvedReconnect | false;
  readonly ackTimeoutMs: number | false;
  readonly idleTimeoutMs: number | false;
}

/** A value as a message shows it: `` `-5` (number) ``. */
function describe(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else if (Array.isArray(value)) text = 'array';
  else if (typeof value === 'object' && value !== null) text = 'object';
  else if (typeof value === 'function') text = 'function';
  else text = String(value);
  return `\`${text}\` (${value === null ? 'null' : typeof value})`;
}

function fail(code: ErrorCodeValue, message: string): never {
  throw new OptionsError(code, message);
}

/** Levenshtein distance, case-insensitive: enough to catch a typo. */
function distance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  let previous = Array.from({ length: t.length + 1 }, (_, j) => j);
  for (let i = 1; i <= s.length; i++) {
    const current = [i];
    for (let j = 1; j <= t.length; j++) {
      const substitution = (previous[j - 1] as number) + (s[i - 1] === t[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitution));
    }
    previous = current;
  }
  return previous[t.length] as number;
}

/** Refuses a key `where` does not take, suggesting the nearest known one (within a third of its length). */
function knownKeys(options: object, known: readonly string[], where: string): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    let near: string | undefined;
    let best = Math.max(1, Math.floor(key.length / 3)) + 1;
    for (const candidate of known) {
      const d = distance(key, candidate);
      if (d < best) [near, best] = [candidate, d];
    }
    const advice =
      near !== undefined ? `did you mean \`${near}\`?` : `expected one of ${known.map((k) => `\`${k}\``).join(', ')}`;
    fail(ErrorCode.UnknownOption, `Unknown option \`${key}\` of ${where}; ${advice}`);
  }
}

function positiveInteger(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    fail(ErrorCode.NotPositiveInteger, `Expected \`${name}\` to be a positive integer, got ${describe(value)}`);
  }
  return value;
}

function durationMs(name: string, value: unknown): number {
  const ms = positiveInteger(name, value);
  if (ms > MAX_TIMER_MS) {
    fail(
      ErrorCode.DurationTooLong,
      `Expected \`${name}\` to be at most ${MAX_TIMER_MS} ms (about 24.8 days), got ${describe(value)}`,
    );
  }
  return ms;
}

function durationOrFalse(name: string, value: unknown, fallback: number | false): number | false {
  if (value === undefined) return fallback;
  return value === false ? false : durationMs(name, value);
}

function objectOption(name: string, value: unknown): asserts value is Record<string, unknown> {
  if (!isPlainObject(value))
    fail(ErrorCode.OptionsNotObject, `Expected ${name} to be an object, got ${describe(value)}`);
}

/** The URL, absolute, `http:` or `https:`. */
function checkUrl(value: unknown): string {
  let url: URL | undefined;
  if (value instanceof URL) url = value;
  else if (typeof value === 'string' && URL.canParse(value)) url = new URL(value);
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    fail(
      ErrorCode.InvalidUrl,
      `Expected the URL of listen() to be an absolute http: or https: URL, got ${describe(value)}`,
    );
  }
  return url.href;
}

/** The filter: an object whose known fields have their types; fields of later revisions pass as they are. */
function checkFilter(value: unknown): ListenFilter {
  if (!isPlainObject(value))
    fail(ErrorCode.InvalidFilter, `Expected the filter of listen() to be an object, got ${describe(value)}`);
  for (const flag of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) {
    const flagValue = value[flag];
    if (flagValue !== undefined && typeof flagValue !== 'boolean') {
      fail(ErrorCode.InvalidFilter, `Expected \`filter.${flag}\` to be a boolean, got ${describe(flagValue)}`);
    }
  }
  for (const list of ['resourceSubscriptions', 'taskIds'] as const) {
    const items = value[list];
    if (items === undefined) continue;
    if (!Array.isArray(items))
      fail(ErrorCode.InvalidFilter, `Expected \`filter.${list}\` to be an array of strings, got ${describe(items)}`);
    const wrong = (items as unknown[]).findIndex((item) => typeof item !== 'string');
    if (wrong !== -1) {
      fail(
        ErrorCode.InvalidFilter,
        `Expected \`filter.${list}[${wrong}]\` to be a string, got ${describe(items[wrong])}`,
      );
    }
  }
  return value;
}

/** Headers: an object of strings that leaves the protocol's own headers to the client. */
export function checkHeaders(value: unknown, name = '`headers`'): Record<string, string> {
  if (!isPlainObject(value))
    fail(ErrorCode.InvalidHeaders, `Expected ${name} to be an object of strings, got ${describe(value)}`);
  const headers: Record<string, string> = {};
  for (const [key, header] of Object.entries(value)) {
    if (typeof header !== 'string') {
      fail(ErrorCode.InvalidHeaders, `Expected header \`${key}\` of ${name} to be a string, got ${describe(header)}`);
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
  return fail(ErrorCode.InvalidRequestId, `Expected \`id\` to be a string or a finite number, got ${describe(value)}`);
}

function checkSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  return fail(ErrorCode.InvalidSignal, `Expected \`signal\` to be an AbortSignal, got ${describe(value)}`);
}

function checkReconnect(value: unknown): ResolvedReconnect | false {
  if (value === undefined || value === false) return false;
  const given: Record<string, unknown> = value === true ? {} : (objectOption('`reconnect`', value), value);
  knownKeys(given, RECONNECT_OPTION_KEYS, 'listen() `reconnect`');
  const initialDelayMs =
    given.initialDelayMs === undefined
      ? DEFAULTS.initialDelayMs
      : durationMs('reconnect.initialDelayMs', given.initialDelayMs);
  const maxDelayMs =
    given.maxDelayMs === undefined ? DEFAULTS.maxDelayMs : durationMs('reconnect.maxDelayMs', given.maxDelayMs);
  if (initialDelayMs > maxDelayMs) {
    fail(
      ErrorCode.ConflictingOptions,
      `Expected \`reconnect.initialDelayMs\` (${initialDelayMs}) to be at most \`reconnect.maxDelayMs\` (${maxDelayMs})`,
    );
  }
  const maxAttempts =
    given.maxAttempts === undefined || given.maxAttempts === false
      ? false
      : positiveInteger('reconnect.maxAttempts', given.maxAttempts);
  return Object.freeze({ initialDelayMs, maxDelayMs, maxAttempts });
}

/** The client capabilities, with the Tasks extension declared when the filter asks for `taskIds`. */
function capabilitiesFor(filter: ListenFilter, value: unknown): Record<string, unknown> {
  if (value !== undefined) objectOption('`clientCapabilities`', value);
  const capabilities: Record<string, unknown> = { ...value };
  if (filter.taskIds === undefined) return capabilities;
  const extensions = capabilities.extensions;
  if (extensions !== undefined && !isPlainObject(extensions)) {
    fail(
      ErrorCode.OptionsNotObject,
      `Expected \`clientCapabilities.extensions\` to be an object, got ${describe(extensions)}`,
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
  objectOption('the options of listen()', options);
  knownKeys(options, LISTEN_OPTION_KEYS, 'listen()');
  const given = options as ListenOptions & Record<string, unknown>;

  const id = checkId(given.id);
  const fetchOption = given.fetch ?? globalThis.fetch;
  if (typeof fetchOption !== 'function') {
    fail(ErrorCode.NotFunction, `Expected \`fetch\` to be a function, got ${describe(given.fetch)}`);
  }
  const headerOption = given.headers;
  let headers: () => Promise<Record<string, string>>;
  if (typeof headerOption === 'function') {
    headers = async () => checkHeaders(await headerOption(), 'the headers that `headers()` returned');
  } else {
    const fixed = headerOption === undefined ? {} : checkHeaders(headerOption);
    headers = () => Promise.resolve({ ...fixed });
  }
  const maxBuffer = given.maxBuffer === undefined ? DEFAULTS.maxBuffer : positiveInteger('maxBuffer', given.maxBuffer);
  const maxEventBytes =
    given.maxEventBytes === undefined ? DEFAULTS.maxEventBytes : positiveInteger('maxEventBytes', given.maxEventBytes);
  const overflow = given.overflow === undefined ? DEFAULTS.overflow : given.overflow;
  if (!(OVERFLOW_POLICIES as readonly unknown[]).includes(overflow)) {
    fail(
      ErrorCode.NotOneOf,
      `Expected \`overflow\` to be one of ${OVERFLOW_POLICIES.map((p) => `'${p}'`).join(', ')}, got ${describe(overflow)}`,
    );
  }
  const signal = checkSignal(given.signal);
  const reconnect = checkReconnect(given.reconnect);
  const ackTimeoutMs = durationOrFalse('ackTimeoutMs', given.ackTimeoutMs, DEFAULTS.ackTimeoutMs);
  const idleTimeoutMs = durationOrFalse('idleTimeoutMs', given.idleTimeoutMs, DEFAULTS.idleTimeoutMs);

  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: LISTEN_METHOD,
    params: {
      _meta: {
        [PROTOCOL_VERSION_META_KEY]: PROTOCOL_VERSION,
        [CLIENT_CAPABILITIES_META_KEY]: capabilitiesFor(checkedFilter, given.clientCapabilities),
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
      `Expected what waitFor() waits for to be a method name or a predicate, got ${describe(match)}`,
    );
  }
  if (options === undefined) return { timeoutMs: DEFAULTS.waitForTimeoutMs };
  objectOption('the options of waitFor()', options);
  knownKeys(options, WAIT_FOR_OPTION_KEYS, 'waitFor()');
  return { timeoutMs: durationOrFalse('timeoutMs', options.timeoutMs, DEFAULTS.waitForTimeoutMs) };
}

/** The protocol's own headers of every attempt, after the caller's. */
export function requestHeaders(caller: Record<string, string>): Record<string, string> {
  return {
    ...caller,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': LISTEN_METHOD,
  };
}
