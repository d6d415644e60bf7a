/**
 * What the Express middleware must answer to one POST, decided from the spec (§5, §6 and §7 of
 * shared/spec/subscriptions-listen.md), the README's error table and the middleware's documented
 * routing, written out independently of lib/ so that the fuzzer can check every answer exactly. Only
 * "is this an absolute URI" is asked of the library (its own rule is fuzzed on its own elsewhere).
 */
import { isAbsoluteUri } from '../../lib/internal.ts';

const LISTEN = 'subscriptions/listen';
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
const TASKS = 'io.modelcontextprotocol/tasks';

/** The server under test, as far as the answer depends on it. */
export interface OracleServer {
  readonly maxBodyBytes: number;
  readonly maxFilterEntries: number;
  readonly protocolVersions: readonly string[];
  /** Every capability is offered and every check admits: the ack is the validated request. */
  readonly tasks: boolean;
}

export type Expected =
  /** Not ours: handed on to the host's handler, with `req.body` left as `express.json()` would (or unread). */
  | { readonly kind: 'passed-on'; readonly read: boolean; readonly body?: unknown }
  | { readonly kind: 'error'; readonly status: number; readonly code: number; readonly id: string | number | null }
  | { readonly kind: 'ack'; readonly id: string | number; readonly notifications: Record<string, unknown> };

type Headers = Readonly<Record<string, string | string[] | undefined>>;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function jsonContentType(value: string): boolean {
  const type = value.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

function acceptsEventStream(value: string): boolean {
  return value
    .split(',')
    .map((range) => range.split(';')[0]!.trim().toLowerCase())
    .some((range) => range === 'text/event-stream' || range === 'text/*' || range === '*/*');
}

const one = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

function validId(value: unknown): string | number | null {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value)) ? value : null;
}

const NOT_JSON = Symbol('not JSON');

/**
 * The answer to a POST of `body` whose headers reached the server as `headers` (Node's merged view),
 * from a caller with a principal and no open stream to cancel.
 */
export function expectedAnswer(body: Buffer, headers: Headers, server: OracleServer): Expected {
  const method = one(headers['mcp-method']);
  // The middleware's routing (docs/mount-order.md): the body is read whatever method the header names,
  // and whatever names listen anywhere (the body, a batch, any of the header's comma-separated values)
  // is ours. A body that is not JSON, from a request whose header does not name listen, is not read.
  const headerNamesListen = method !== undefined && method.split(',').some((part) => part.trim() === LISTEN);
  const contentType = one(headers['content-type']);
  if (!(contentType !== undefined && jsonContentType(contentType)) && !headerNamesListen) {
    return { kind: 'passed-on', read: false };
  }
  if (body.length > server.maxBodyBytes) return { kind: 'error', status: 413, code: -32600, id: null };
  let parsed: unknown = NOT_JSON;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    // -32700 below, once content negotiation had its say.
  }
  if (parsed === NOT_JSON && !headerNamesListen) return { kind: 'error', status: 400, code: -32700, id: null };
  const bodyMethod = isObject(parsed) ? parsed.method : undefined;
  const batchNamesListen = Array.isArray(parsed) && parsed.some((entry) => isObject(entry) && entry.method === LISTEN);
  if (bodyMethod !== LISTEN && !headerNamesListen && !batchNamesListen) {
    // Ours only to cancel a stream, and this caller has none open.
    return { kind: 'passed-on', read: true, body: parsed };
  }

  // A listen request: content negotiation, then spec §6 in order.
  const id = isObject(parsed) ? validId(parsed.id) : null;
  if (contentType !== undefined && !jsonContentType(contentType))
    return { kind: 'error', status: 415, code: -32600, id };
  const accept = one(headers.accept);
  if (accept !== undefined && !acceptsEventStream(accept)) return { kind: 'error', status: 406, code: -32600, id };
  if (parsed === NOT_JSON) return { kind: 'error', status: 400, code: -32700, id: null };
  const error = (status: number, code: number, withId = true): Expected => ({
    kind: 'error',
    status,
    code,
    id: withId ? id : null,
  });
  if (!isObject(parsed)) return error(400, -32600, false);
  if (parsed.jsonrpc !== '2.0') return error(400, -32600);
  if (id === null) return error(400, -32600, false);
  if (typeof parsed.method !== 'string') return error(400, -32600);
  if (parsed.params !== undefined && !isObject(parsed.params)) return error(400, -32600);
  const params = parsed.params ?? {};
  const meta = params._meta;
  if (!isObject(meta)) return error(400, -32602);
  const version = meta[VERSION_KEY];
  if (typeof version !== 'string' || version === '') return error(400, -32602);
  const capabilities = meta[CAPABILITIES_KEY];
  if (!isObject(capabilities)) return error(400, -32602);
  if (one(headers['mcp-protocol-version']) !== version) return error(400, -32020);
  if (method !== parsed.method) return error(400, -32020);
  if (!server.protocolVersions.includes(version)) return error(400, -32022);
  if (parsed.method !== LISTEN) return error(404, -32601);
  const notifications = params.notifications;
  if (server.tasks && isObject(notifications) && notifications.taskIds !== undefined) {
    const extensions = capabilities.extensions;
    if (!isObject(extensions) || !isObject(extensions[TASKS])) return error(400, -32021);
  }
  if (!isObject(notifications)) return error(400, -32602);
  const honored: Record<string, unknown> = {};
  for (const flag of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) {
    const value = notifications[flag];
    if (value !== undefined && typeof value !== 'boolean') return error(400, -32602);
    if (value === true) honored[flag] = true;
  }
  const lists: [string, (entry: string) => boolean][] = [['resourceSubscriptions', isAbsoluteUri]];
  if (server.tasks) lists.push(['taskIds', (entry) => entry !== '']);
  for (const [field, valid] of lists) {
    const value = notifications[field];
    if (value === undefined) continue;
    if (!Array.isArray(value) || value.length > server.maxFilterEntries) return error(400, -32602);
    if (!value.every((entry) => typeof entry === 'string' && valid(entry))) return error(400, -32602);
    if (value.length > 0) honored[field] = [...new Set(value as string[])];
  }
  return { kind: 'ack', id, notifications: honored };
}
