/**
 * One listen request, end to end: parse, reserve a slot, authorize every URI and task id, open the
 * stream, acknowledge, register with the hub. Adapters call {@link createListenHandler} once and hand
 * each request's body, headers, principal and raw response to it.
 */
import { authorizeEach, type ItemCheck } from './authorize.ts';
import { defineCapabilities, type ResolvedCapabilities, type SubscriptionCapabilities } from './capabilities.ts';
import { checkErrorChannel, type Logger } from './diagnostics.ts';
import { describeValue, hasErrorCode, ErrorCode, OptionsError, ProtocolError, RpcErrorCode } from './errors.ts';
import { durationOrFalse, optionalFunction, optionsObject, positiveInteger } from './options.ts';
import { SUPPORTED_PROTOCOL_VERSIONS, type NotificationFilter, type RequestId } from './events.ts';
import type { StreamResponse } from './listen-stream.ts';
import {
  ackFrame,
  cancelledRequestId,
  CANCELLED_METHOD,
  echoableId,
  errorResponseJson,
  LISTEN_METHOD,
  parseJsonBody,
  parseListenRequest,
  resultFrame,
  type HeaderBag,
  type ListenRequest,
} from './protocol.ts';
import type { SubscriptionHub } from './subscription-hub.ts';

/** What the host's checks and hooks are told about the caller. */
export interface CheckContext<Req = unknown> {
  /** The caller's identity, as the adapter resolved it from the host's auth. */
  readonly principal: string;
  /** The framework's request (Express `req`, …), for checks that need the host's own auth state. */
  readonly request: Req;
  /**
   * Aborted when the client goes away before its stream opens: pass it to your database calls so
   * that an abandoned listen stops costing. (A check that times out is abandoned, not stopped.)
   */
  readonly signal: AbortSignal;
}

/**
 * A host check of one URI or task id. Only `true` admits it; `false`, a throw, a rejection or a
 * timeout leaves it out silently.
 */
export type ResourceCheck<Req = unknown> = (item: string, context: CheckContext<Req>) => boolean | PromiseLike<boolean>;

/** Options of {@link createListenHandler}; the adapters take the same. */
export interface ListenHandlerOptions<Req = unknown> {
  /** The hub whose events the streams deliver. Required. */
  readonly hub: SubscriptionHub;
  /**
   * What the server offers, declared once: the acknowledgement is narrowed to it, and
   * `toServerCapabilities()` of the same object is what `server/discover` should advertise. Required.
   */
  readonly capabilities: SubscriptionCapabilities;
  /**
   * The read check `resources/read` uses: may this caller read `uri`? Required when
   * `capabilities.resourceSubscriptions` is on: a URI nobody checked is never honoured.
   */
  readonly canRead?: ResourceCheck<Req>;
  /**
   * The subscribe hook (ConduitMCP's `handle_subscribe_resource`), run after `canRead` passed: may this
   * URI be subscribed to here (a scheme you serve, a resource you can watch)?
   * @default accepts every readable URI
   */
  readonly handleSubscribeResource?: ResourceCheck<Req>;
  /**
   * Tasks extension: does the caller own `taskId` (and does it exist)? Required when
   * `capabilities.tasks` is on. An unknown id and a foreign one must both answer `false`.
   */
  readonly canAccessTask?: ResourceCheck<Req>;
  /** Interval of SSE keepalive comments, or `false` for none. @default 15000 */
  readonly keepAliveMs?: number | false;
  /** Most URIs, and most task ids, one listen request may name. @default 1000 */
  readonly maxFilterEntries?: number;
  /** Checks in flight at once for one listen request. @default 16 */
  readonly authorizeConcurrency?: number;
  /** How long one check may take before its URI is dropped, or `false` for no limit. @default 5000 */
  readonly authorizeTimeoutMs?: number | false;
  /** Protocol revisions served. @default ['2026-07-28'] */
  readonly protocolVersions?: readonly string[];
  /** Stamped on the terminal result's `_meta` as `io.modelcontextprotocol/serverInfo`. @default none */
  readonly serverInfo?: { readonly name: string; readonly version: string; readonly [key: string]: unknown };
  /** Where failed checks are reported. @default the hub's logger */
  readonly logger?: Logger;
}

/** Listen options after defaults and validation. */
export interface ResolvedListenOptions<Req = unknown> {
  readonly hub: SubscriptionHub;
  readonly capabilities: ResolvedCapabilities;
  readonly canRead: ResourceCheck<Req> | undefined;
  readonly handleSubscribeResource: ResourceCheck<Req> | undefined;
  readonly canAccessTask: ResourceCheck<Req> | undefined;
  readonly keepAliveMs: number | false;
  readonly maxFilterEntries: number;
  readonly authorizeConcurrency: number;
  readonly authorizeTimeoutMs: number | false;
  readonly protocolVersions: readonly string[];
  readonly serverInfo: ListenHandlerOptions['serverInfo'];
  readonly logger: Logger;
}

/** One request as an adapter hands it over. */
export interface ListenInput<Req = unknown> {
  /** The parsed JSON body; or `undefined` with `rawBody` set when the adapter read the bytes itself. */
  readonly body?: unknown;
  /** The body's bytes, when no body parser ran. */
  readonly rawBody?: string | Buffer;
  readonly headers: HeaderBag;
  readonly principal: string;
  readonly request: Req;
}

/** The engine's face to adapters. */
export interface ListenHandler<Req = unknown> {
  readonly options: ResolvedListenOptions<Req>;
  /**
   * Serves one listen request on `res`: a JSON-RPC error response before any stream opens, or the
   * stream. Never rejects: runtime failures are logged and close only this response.
   */
  handle(input: ListenInput<Req>, res: StreamResponse): Promise<void>;
  /**
   * Handles a `notifications/cancelled` body: closes the caller's open streams it names. Returns
   * `false` when it names none (the adapter passes it on to the host's MCP server).
   */
  cancel(principal: string, body: unknown): boolean;
}

/** Which of ours a request is, from its parsed body (or `undefined` when unparseable) and headers. */
export function routeOf(body: unknown, headers: HeaderBag): 'listen' | 'cancelled' | 'other' {
  const method =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? (body as { method?: unknown }).method
      : undefined;
  if (method === LISTEN_METHOD || headers['mcp-method'] === LISTEN_METHOD) return 'listen';
  if (method === CANCELLED_METHOD) return 'cancelled';
  return 'other';
}

/** Applies defaults to listen options and validates them; never mutates its input. */
export function resolveListenOptions<Req>(options: ListenHandlerOptions<Req>): ResolvedListenOptions<Req> {
  optionsObject(options);
  const hub = options.hub as SubscriptionHub | undefined;
  if (typeof hub !== 'object' || hub === null || typeof hub.reserve !== 'function') {
    throw new OptionsError(`Expected \`hub\` to be a SubscriptionHub, got ${describeValue(hub)}`);
  }
  if (options.capabilities === undefined) {
    throw new OptionsError(
      'Expected `capabilities` to declare what the server offers, e.g. `{ toolsListChanged: true, resourceSubscriptions: true }`',
    );
  }
  const capabilities = defineCapabilities(options.capabilities);
  optionalFunction('canRead', options.canRead);
  optionalFunction('handleSubscribeResource', options.handleSubscribeResource);
  optionalFunction('canAccessTask', options.canAccessTask);
  if (capabilities.resourceSubscriptions && options.canRead === undefined) {
    throw new OptionsError(
      'Expected `canRead` (the read check your resources/read uses) since `capabilities.resourceSubscriptions` is on',
    );
  }
  if (capabilities.tasks && options.canAccessTask === undefined) {
    throw new OptionsError(
      'Expected `canAccessTask` (does the caller own this task?) since `capabilities.tasks` is on',
    );
  }
  const protocolVersions = options.protocolVersions ?? SUPPORTED_PROTOCOL_VERSIONS;
  if (
    !Array.isArray(protocolVersions) ||
    protocolVersions.length === 0 ||
    protocolVersions.some((v) => typeof v !== 'string')
  ) {
    throw new OptionsError('Expected `protocolVersions` to be a non-empty array of strings');
  }
  if (options.serverInfo !== undefined && (typeof options.serverInfo !== 'object' || options.serverInfo === null)) {
    throw new OptionsError('Expected `serverInfo` to be an object like `{ name, version }`');
  }
  return Object.freeze({
    hub,
    capabilities,
    canRead: options.canRead,
    handleSubscribeResource: options.handleSubscribeResource,
    canAccessTask: options.canAccessTask,
    keepAliveMs: durationOrFalse('keepAliveMs', options.keepAliveMs ?? 15_000),
    maxFilterEntries: positiveInteger('maxFilterEntries', options.maxFilterEntries ?? 1000),
    authorizeConcurrency: positiveInteger('authorizeConcurrency', options.authorizeConcurrency ?? 16),
    authorizeTimeoutMs: durationOrFalse('authorizeTimeoutMs', options.authorizeTimeoutMs ?? 5000),
    protocolVersions: Object.freeze([...(protocolVersions as readonly string[])]),
    serverInfo: options.serverInfo,
    logger: options.logger ?? hub.options.logger,
  });
}

/** Writes a JSON-RPC error response: the one place errors raised before a stream opens are written. */
export function writeProtocolError(res: StreamResponse, error: ProtocolError): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(error.httpStatus, { 'Content-Type': 'application/json', ...error.headers });
  res.end(errorResponseJson(error));
}

const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** Whether a Content-Type header names JSON (`application/json`, `application/*+json`, parameters allowed). */
export function isJsonContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_CONTENT_TYPE.test(contentType);
}
const ACCEPTS_SSE = /(?:^|,)\s*(?:text\/event-stream|text\/\*|\*\/\*)\s*(?:;|,|$)/i;

function checkHttp(headers: HeaderBag, body: unknown): void {
  const contentType = headers['content-type'];
  if (typeof contentType === 'string' && !isJsonContentType(contentType)) {
    throw new ProtocolError(
      RpcErrorCode.InvalidRequest,
      'Unsupported Media Type: Content-Type must be application/json',
      {
        id: echoableId(body),
        httpStatus: 415,
      },
    );
  }
  const accept = headers.accept;
  if (typeof accept === 'string' && !ACCEPTS_SSE.test(accept)) {
    throw new ProtocolError(
      RpcErrorCode.InvalidRequest,
      'Not Acceptable: the Accept header must list text/event-stream',
      {
        id: echoableId(body),
        httpStatus: 406,
      },
    );
  }
}

/**
 * Creates the listen engine an adapter serves requests with. Options are validated here; a mistake
 * throws an `OptionsError` naming the field.
 */
export function createListenHandler<Req = unknown>(options: ListenHandlerOptions<Req>): ListenHandler<Req> {
  const resolved = resolveListenOptions(options);
  const { hub, capabilities, logger } = resolved;
  const parseOptions = {
    protocolVersions: resolved.protocolVersions,
    maxFilterEntries: resolved.maxFilterEntries,
    tasksEnabled: capabilities.tasks,
  };
  const uriChecks: ItemCheck<CheckContext<Req>>[] = [];
  if (resolved.canRead) uriChecks.push(resolved.canRead);
  if (resolved.handleSubscribeResource) uriChecks.push(resolved.handleSubscribeResource);
  const taskChecks: ItemCheck<CheckContext<Req>>[] = resolved.canAccessTask ? [resolved.canAccessTask] : [];
  const stageNames = ['canRead', 'handleSubscribeResource'];

  const onCheckError =
    (what: 'resource' | 'task') =>
    (error: unknown, stage: number): void => {
      const hook = what === 'task' ? 'canAccessTask' : (stageNames[stage] ?? 'check');
      // The item itself is not logged: URIs and task ids can be confidential.
      logger.warn(`${hook} failed; the ${what} was left out of the acknowledgement`, { error });
      // The host's error may quote the URI: telemetry gets its name and code only.
      if (checkErrorChannel.hasSubscribers) {
        const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
        checkErrorChannel.publish({ stage: hook, errorName: name, errorCode: code });
      }
    };
  const onResourceError = onCheckError('resource');
  const onTaskError = onCheckError('task');

  async function narrow(requested: NotificationFilter, context: CheckContext<Req>): Promise<NotificationFilter> {
    const honored: { -readonly [K in keyof NotificationFilter]: NotificationFilter[K] } = {};
    if (requested.toolsListChanged && capabilities.toolsListChanged) honored.toolsListChanged = true;
    if (requested.promptsListChanged && capabilities.promptsListChanged) honored.promptsListChanged = true;
    if (requested.resourcesListChanged && capabilities.resourcesListChanged) honored.resourcesListChanged = true;
    const run = {
      concurrency: resolved.authorizeConcurrency,
      timeoutMs: resolved.authorizeTimeoutMs,
      signal: context.signal,
    };
    const [uris, taskIds] = await Promise.all([
      requested.resourceSubscriptions && capabilities.resourceSubscriptions
        ? authorizeEach(requested.resourceSubscriptions, uriChecks, context, { ...run, onError: onResourceError })
        : undefined,
      requested.taskIds && capabilities.tasks
        ? authorizeEach(requested.taskIds, taskChecks, context, { ...run, onError: onTaskError })
        : undefined,
    ]);
    if (uris !== undefined && uris.length > 0) honored.resourceSubscriptions = uris;
    if (taskIds !== undefined && taskIds.length > 0) honored.taskIds = taskIds;
    return honored;
  }

  async function handle(input: ListenInput<Req>, res: StreamResponse): Promise<void> {
    let request: ListenRequest;
    let id: RequestId | null = null;
    try {
      // HTTP-level checks come first: a body that is not JSON by its Content-Type is not parsed.
      checkHttp(input.headers, input.body);
      // The body is read into locals only: an open stream must not pin a large request in memory.
      const body =
        input.body !== undefined || input.rawBody === undefined ? input.body : parseJsonBody(String(input.rawBody));
      id = echoableId(body);
      request = parseListenRequest(body, input.headers, parseOptions);
    } catch (error) {
      if (hasErrorCode(error, ErrorCode.Protocol)) writeProtocolError(res, error as ProtocolError);
      else fail(res, error, id);
      return;
    }

    const { principal } = input;
    let reservation;
    try {
      reservation = hub.reserve(principal, request.id);
    } catch (error) {
      if (hasErrorCode(error, ErrorCode.Protocol)) writeProtocolError(res, error as ProtocolError);
      else fail(res, error, request.id);
      return;
    }

    // The client may leave while its URIs are being checked: stop checking and give the slot back.
    const gone = new AbortController();
    const onGone = (): void => gone.abort();
    res.once('close', onGone);
    let honored: NotificationFilter;
    try {
      honored = await narrow(request.filter, { principal, request: input.request, signal: gone.signal });
    } catch (error) {
      reservation.release();
      res.removeListener('close', onGone);
      fail(res, error, request.id);
      return;
    }
    res.removeListener('close', onGone);
    if (gone.signal.aborted || res.destroyed) {
      reservation.release();
      return;
    }
    const idJson = JSON.stringify(request.id);
    try {
      reservation.open(res, {
        id: request.id,
        filter: honored,
        keepAliveMs: resolved.keepAliveMs,
        ackFrame: ackFrame(idJson, honored),
        resultFrame: resultFrame(idJson, resolved.serverInfo),
      });
    } catch (error) {
      reservation.release();
      // The hub closing while this request was being authorized is a refusal, not a failure.
      if (hasErrorCode(error, ErrorCode.Protocol)) writeProtocolError(res, error as ProtocolError);
      else fail(res, error, request.id);
    }
  }

  function fail(res: StreamResponse, error: unknown, id: RequestId | null): void {
    logger.error('subscriptions/listen failed', { error });
    writeProtocolError(res, new ProtocolError(RpcErrorCode.InternalError, 'Internal error', { id, httpStatus: 500 }));
    if (res.headersSent && !res.writableEnded && !res.destroyed) res.destroy();
  }

  function cancel(principal: string, body: unknown): boolean {
    const requestId = cancelledRequestId(body);
    return requestId !== undefined && hub.cancel(principal, requestId) > 0;
  }

  return Object.freeze({ options: resolved, handle, cancel });
}
