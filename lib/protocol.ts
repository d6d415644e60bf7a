/**
 * The listen request on the wire: parsing and validating it in the order the spec and the
 * conformance suite expect (spec §6), validating published events, and serializing every message a
 * stream writes. Validation is linear in the request's size.
 */
import {
  ACK_METHOD,
  CANCELLED_METHOD,
  CLIENT_CAPABILITIES_META_KEY,
  LISTEN_METHOD,
  NOTIFICATION_METHODS,
  PROTOCOL_VERSION_META_KEY,
  SERVER_INFO_META_KEY,
  SUBSCRIPTION_ID_META_KEY,
  TASKS_EXTENSION,
} from './events.ts';
import { describeValue, EventError, ProtocolError } from './errors.ts';
import { sseFrame, splitFrame, type SplitFrame } from './sse.ts';
import type { NotificationFilter, RequestId, SubscriptionEvent } from './types.ts';
import { isPlainObject } from './validate.ts';

/** Request headers as Node gives them: lower-case names. */
export type HeaderBag = Readonly<Record<string, string | readonly string[] | undefined>>;

/** A validated listen request: what the engine needs, and nothing of the body besides. */
export interface ListenRequest {
  /** The request id, verbatim; it is the stream's subscription id. */
  readonly id: RequestId;
  /** The protocol revision the client asked for. */
  readonly protocolVersion: string;
  /** The requested filter: only `true` flags, URIs and task ids de-duplicated in request order. */
  readonly filter: NotificationFilter;
}

/** Limits and switches of {@link parseListenRequest}. */
export interface ParseOptions {
  /** Protocol revisions served. */
  readonly protocolVersions: readonly string[];
  /** Most URIs, and most task ids, one request may name. */
  readonly maxFilterEntries: number;
  /** Whether this server enables the Tasks extension (else `taskIds` is an unknown field). */
  readonly tasksEnabled: boolean;
}

const LIST_FLAGS = ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const;

/** An absolute URI: a scheme, a colon, then no whitespace, control character or quote (RFC 3986 §4.3). */
// Control characters are exactly what this pattern must refuse.
// eslint-disable-next-line no-control-regex
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s\u0000-\u001f\u007f"<>\\^`{|}]*$/;

/**
 * The same rule for printable ASCII only, which is what URIs almost always are: every character it
 * admits, {@link ABSOLUTE_URI} admits too, and without Unicode whitespace classes it runs about a
 * third faster. A URI it refuses is then judged by the full pattern.
 */
const ABSOLUTE_ASCII_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[!#-;=?-[\]_a-z~]*$/;

/** Whether `value` is an absolute URI (a scheme and a colon, no spaces or control characters). */
export function isAbsoluteUri(value: string): boolean {
  return ABSOLUTE_ASCII_URI.test(value) || ABSOLUTE_URI.test(value);
}

/**
 * A header's value as Node gives it; one given several times reads as Node joins it (`a, b`), so that
 * a repeated header matches no single value (two `Mcp-Method` headers are a mismatch, not the first).
 */
function headerValue(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : value?.join(', ');
}

function header(headers: HeaderBag, name: string): string | undefined {
  return headerValue(headers[name]);
}

function invalidParams(message: string, id: RequestId | null): ProtocolError {
  return new ProtocolError('invalid-params', `Invalid params: ${message}`, { id });
}

/** Parses a body's text, or throws the -32700 error (spec §6, first row). */
export function parseJsonBody(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ProtocolError('parse-error', 'Parse error: the request body is not valid JSON', {
      id: null,
    });
  }
}

/** The id to echo on an error: the body's id when it is a string or a number, else `null`. */
export function echoableId(body: unknown): RequestId | null {
  if (!isPlainObject(body)) return null;
  const { id } = body;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

/**
 * Validates a parsed listen request against its headers and returns what the engine keeps. Throws a
 * {@link ProtocolError} for the first check that fails, in the spec's order.
 */
export function parseListenRequest(body: unknown, headers: HeaderBag, options: ParseOptions): ListenRequest {
  // -32600: a single JSON-RPC request object.
  if (!isPlainObject(body)) {
    throw new ProtocolError(
      'invalid-request',
      Array.isArray(body)
        ? 'Invalid Request: batches are not supported; send a single JSON-RPC request object'
        : 'Invalid Request: the body must be a single JSON-RPC request object',
      { id: null },
    );
  }
  const id = echoableId(body);
  if (body.jsonrpc !== '2.0') {
    throw new ProtocolError('invalid-request', 'Invalid Request: `jsonrpc` must be "2.0"', { id });
  }
  if (id === null) {
    throw new ProtocolError(
      'invalid-request',
      'Invalid Request: `id` must be a string or a number (subscriptions/listen is a request, not a notification)',
      { id: null },
    );
  }
  if (typeof body.method !== 'string') {
    throw new ProtocolError('invalid-request', 'Invalid Request: `method` must be a string', { id });
  }
  if (body.params !== undefined && !isPlainObject(body.params)) {
    throw new ProtocolError('invalid-request', 'Invalid Request: `params` must be an object', { id });
  }

  // -32602: the request envelope in `_meta`.
  const params = body.params ?? {};
  const meta = params._meta;
  if (!isPlainObject(meta)) throw invalidParams('`params._meta` is required and must be an object', id);
  const protocolVersion = meta[PROTOCOL_VERSION_META_KEY];
  if (typeof protocolVersion !== 'string' || protocolVersion === '') {
    throw invalidParams(`\`params._meta["${PROTOCOL_VERSION_META_KEY}"]\` is required and must be a string`, id);
  }
  const clientCapabilities = meta[CLIENT_CAPABILITIES_META_KEY];
  if (!isPlainObject(clientCapabilities)) {
    throw invalidParams(
      `\`params._meta["${CLIENT_CAPABILITIES_META_KEY}"]\` is required and must be an object ({} declares none)`,
      id,
    );
  }

  // -32020: the routing headers must repeat the body.
  const versionHeader = header(headers, 'mcp-protocol-version');
  if (versionHeader !== protocolVersion) {
    throw new ProtocolError(
      'header-mismatch',
      versionHeader === undefined
        ? 'Header mismatch: the MCP-Protocol-Version header is required'
        : 'Header mismatch: the MCP-Protocol-Version header differs from `params._meta` protocol version',
      { id },
    );
  }
  const methodHeader = header(headers, 'mcp-method');
  if (methodHeader !== body.method) {
    throw new ProtocolError(
      'header-mismatch',
      methodHeader === undefined
        ? 'Header mismatch: the Mcp-Method header is required'
        : methodHeader.includes(',')
          ? 'Header mismatch: the Mcp-Method header must be sent once, naming the body `method` only'
          : 'Header mismatch: the Mcp-Method header differs from the body `method`',
      { id },
    );
  }

  // -32022: a revision we serve.
  if (!options.protocolVersions.includes(protocolVersion)) {
    throw new ProtocolError(
      'unsupported-protocol-version',
      `Unsupported protocol version: supported versions are ${options.protocolVersions.join(', ')}`,
      { id, data: { supported: [...options.protocolVersions], requested: protocolVersion } },
    );
  }

  if (body.method !== LISTEN_METHOD) {
    throw new ProtocolError('method-not-found', 'Method not found', { id });
  }

  const notifications = params.notifications;

  // -32021: task ids need the extension declared on this very request (spec §7).
  if (options.tasksEnabled && isPlainObject(notifications) && notifications.taskIds !== undefined) {
    const extensions = clientCapabilities.extensions;
    if (!isPlainObject(extensions) || !isPlainObject(extensions[TASKS_EXTENSION])) {
      throw new ProtocolError(
        'missing-capability',
        `Missing required client capability: \`taskIds\` needs the ${TASKS_EXTENSION} extension declared in \`clientCapabilities.extensions\``,
        { id, data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } } },
      );
    }
  }

  // -32602: the filter.
  if (!isPlainObject(notifications)) {
    throw invalidParams('`params.notifications` is required and must be an object', id);
  }
  const filter: {
    -readonly [K in keyof NotificationFilter]: NotificationFilter[K];
  } = {};
  for (const flag of LIST_FLAGS) {
    const value = notifications[flag];
    if (value === undefined) continue;
    if (typeof value !== 'boolean') throw invalidParams(`\`params.notifications.${flag}\` must be a boolean`, id);
    if (value) filter[flag] = true;
  }
  const uris = stringList(notifications, 'resourceSubscriptions', options.maxFilterEntries, id, true);
  if (uris !== undefined) filter.resourceSubscriptions = uris;
  if (options.tasksEnabled) {
    const taskIds = stringList(notifications, 'taskIds', options.maxFilterEntries, id, false);
    if (taskIds !== undefined) filter.taskIds = taskIds;
  }
  return { id, protocolVersion, filter };
}

function stringList(
  notifications: Record<string, unknown>,
  field: 'resourceSubscriptions' | 'taskIds',
  max: number,
  id: RequestId,
  uris: boolean,
): string[] | undefined {
  const value = notifications[field];
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw invalidParams(`\`params.notifications.${field}\` must be an array of strings`, id);
  // The bound comes first so that an oversized list is refused without walking it.
  if (value.length > max) {
    throw invalidParams(
      `\`params.notifications.${field}\` has ${value.length} entries; at most ${max} are allowed per request`,
      id,
    );
  }
  const seen = new Set<string>();
  for (let i = 0; i < value.length; i++) {
    const entry: unknown = value[i];
    if (typeof entry !== 'string') {
      throw invalidParams(`\`params.notifications.${field}[${i}]\` must be a string`, id);
    }
    if (uris ? !isAbsoluteUri(entry) : entry === '') {
      throw invalidParams(
        uris
          ? `\`params.notifications.${field}[${i}]\` must be an absolute URI`
          : `\`params.notifications.${field}[${i}]\` must be a non-empty string`,
        id,
      );
    }
    seen.add(entry);
  }
  // No duplicates (the usual case): the list itself, not a walk of the set. It is read while the
  // request is authorized and never kept: what a stream keeps is the new list of what passed.
  return seen.size === 0 ? undefined : seen.size === value.length ? (value as string[]) : [...seen];
}

/** The listen request id a `notifications/cancelled` names, or `undefined` when the body is not one. */
export function cancelledRequestId(body: unknown): RequestId | undefined {
  if (!isPlainObject(body) || body.method !== CANCELLED_METHOD || body.id !== undefined) return undefined;
  const params = body.params;
  if (!isPlainObject(params)) return undefined;
  const requestId = params.requestId;
  return typeof requestId === 'string' || (typeof requestId === 'number' && Number.isFinite(requestId))
    ? requestId
    : undefined;
}

/** The JSON text of a JSON-RPC error response. */
export function errorResponseJson(error: ProtocolError): string {
  const body: { code: number; message: string; data?: unknown } = { code: error.rpcCode, message: error.message };
  if (error.data !== undefined) body.data = error.data;
  return JSON.stringify({ jsonrpc: '2.0', id: error.id, error: body });
}

/** The acknowledgement frame (spec §2): always the first message of a stream. */
export function ackFrame(idJson: string, honored: NotificationFilter): string {
  return sseFrame(
    `{"jsonrpc":"2.0","method":"${ACK_METHOD}","params":{"_meta":{"${SUBSCRIPTION_ID_META_KEY}":${idJson}},"notifications":${JSON.stringify(honored)}}}`,
  );
}

/** The terminal result frame of a graceful end (spec §4). */
export function resultFrame(idJson: string, serverInfo: object | undefined): string {
  const info = serverInfo === undefined ? '' : `,"${SERVER_INFO_META_KEY}":${JSON.stringify(serverInfo)}`;
  return sseFrame(
    `{"jsonrpc":"2.0","id":${idJson},"result":{"resultType":"complete","_meta":{"${SUBSCRIPTION_ID_META_KEY}":${idJson}${info}}}}`,
  );
}

const ID_META_OPEN = `"_meta":{"${SUBSCRIPTION_ID_META_KEY}":`;

/**
 * An event's frame with a hole for each stream's subscription id: serialized once per publish.
 * `resource_updated` carries its `uri`; `task_status` the task's full state.
 */
export function eventFrame(event: SubscriptionEvent): SplitFrame {
  const open = `{"jsonrpc":"2.0","method":"${NOTIFICATION_METHODS[event.kind]}","params":{`;
  switch (event.kind) {
    case 'resource_updated':
      return splitFrame(`${open}"uri":${JSON.stringify(event.uri)},${ID_META_OPEN}`, '}}}');
    case 'task_status': {
      const { _meta: _ignored, ...state } = event.task as Record<string, unknown>;
      const fields = JSON.stringify(state).slice(1, -1);
      return splitFrame(`${open}${fields},${ID_META_OPEN}`, '}}}');
    }
    default:
      return splitFrame(`${open}${ID_META_OPEN}`, '}}}');
  }
}

const KINDS = new Set(Object.keys(NOTIFICATION_METHODS));

/**
 * Checks an event a host publishes and returns it in canonical form (extra fields dropped). Throws an
 * {@link EventError} naming the field: publishing a bad event is a programmer's mistake.
 */
export function validateEvent(event: unknown): SubscriptionEvent {
  if (!isPlainObject(event) || typeof event.kind !== 'string' || !KINDS.has(event.kind)) {
    throw new EventError(
      `Expected an event with \`kind\` one of ${[...KINDS].join(', ')}, got ${describeValue(isPlainObject(event) ? event.kind : event)}`,
    );
  }
  switch (event.kind) {
    case 'resource_updated':
      if (typeof event.uri !== 'string' || !isAbsoluteUri(event.uri)) {
        throw new EventError('Expected `uri` of a `resource_updated` event to be an absolute URI');
      }
      return { kind: 'resource_updated', uri: event.uri };
    case 'task_status': {
      const task = event.task;
      if (!isPlainObject(task) || typeof task.taskId !== 'string' || task.taskId === '') {
        throw new EventError('Expected `task.taskId` of a `task_status` event to be a non-empty string');
      }
      if (typeof task.status !== 'string') {
        throw new EventError('Expected `task.status` of a `task_status` event to be a string');
      }
      if (typeof event.owner !== 'string') {
        throw new EventError('Expected `owner` of a `task_status` event to be the owning principal (a string)');
      }
      return { kind: 'task_status', task: task as never, owner: event.owner };
    }
    default:
      if (event.uri !== undefined) {
        throw new EventError(`Expected no \`uri\` on a \`${event.kind}\` event; list changes name no resource`);
      }
      return { kind: event.kind as 'tools_list_changed' | 'prompts_list_changed' | 'resources_list_changed' };
  }
}
