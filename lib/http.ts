/**
 * Everything HTTP about listen, in one place: content negotiation, reading the body from Node's
 * request (whether or not a body parser ran), routing listen and `notifications/cancelled`, who the
 * caller is by the common auth conventions, and the HTTP status of every refusal, from one table
 * keyed by refusal reason. Framework-free: it relies only on Node's request and on body-parser's
 * public conventions, so every adapter shares it: on Node's request (Express, Nest's Express platform)
 * through serveNodeRequest(), where the framework has read the body (Fastify, Nest's Fastify
 * platform) through dispatchRequest(), and on the web-standard `Request` (the fetch face, Hono)
 * through serveFetchRequest().
 */
import type { IncomingMessage } from 'node:http';
import { describeValue, ErrorCode, hasErrorCode, ProtocolError, type RefusalReason } from './errors.ts';
import { anonymousPrincipal, isAnonymous } from './principal.ts';
import { CANCELLED_METHOD, LISTEN_METHOD } from './events.ts';
import type { StreamResponse } from './listen-stream.ts';
import { echoableId, errorResponseJson, type HeaderBag } from './protocol.ts';
import type { NodeAdapterOptions, ResolvedListenOptions } from './types.ts';
import { optionKeys } from './validate.ts';
import { CLOSED_BEFORE_HEAD_STATUS, WebStreamResponse } from './web-response.ts';

/** One request as an adapter hands it to the engine. */
export interface ListenInput<Req = unknown> {
  /** The parsed JSON body; or `undefined` with `rawBody` set when the adapter read the bytes itself. */
  readonly body?: unknown;
  /** The body's bytes, when no body parser ran. */
  readonly rawBody?: string | Buffer;
  readonly headers: HeaderBag;
  readonly principal: string;
  readonly request: Req;
}

/**
 * The engine's face to adapters (`middleware.handler` in Express), as this HTTP face drives it;
 * `createListenHandler()` (lib/listen.ts) makes one. Declared here, by the side that calls it, so
 * that the engine may use the HTTP helpers without an import circle.
 */
export interface ListenHandler<Req = unknown> {
  readonly options: ResolvedListenOptions<Req>;
  /**
   * Serves one listen request on `res`: a JSON-RPC error response before any stream opens, or the
   * stream. Never rejects: runtime failures are logged and close only this response.
   */
  handle(input: ListenInput<Req>, res: StreamResponse): Promise<void>;
  /**
   * Handles a `notifications/cancelled` body: ends the caller's listens it names, open or still
   * waiting to open. Returns `false` when it names none here (the adapter passes it on to the host's
   * MCP server; the hub has handed it to the bus, for the node that holds the listen).
   */
  cancel(principal: string, body: unknown): boolean;
  /** Counts a refusal the HTTP layer answered itself, before {@link handle} (`stats().refusals`). */
  refused(reason: RefusalReason): void;
}

/**
 * The HTTP status of each refusal (spec §6, plus the HTTP layer's own). The only such table: a
 * `ProtocolError` carries its reason, never a status.
 */
export const REFUSAL_STATUS: Readonly<Record<RefusalReason, number>> = Object.freeze({
  'parse-error': 400,
  'invalid-request': 400,
  'unsupported-media-type': 415,
  'not-acceptable': 406,
  // The connection is closed too (see refusalHeaders): the rest of the body is never read.
  'body-too-large': 413,
  'invalid-params': 400,
  'header-mismatch': 400,
  'unsupported-protocol-version': 400,
  'method-not-found': 404,
  'missing-capability': 400,
  capacity: 503,
  draining: 503,
  'shutting-down': 503,
  internal: 500,
});

/** The HTTP status a refusal is answered with. */
export function refusalStatus(error: ProtocolError): number {
  return REFUSAL_STATUS[error.reason];
}

/** The response headers of a refusal besides `Content-Type`: `Retry-After`, `Connection: close`. */
export function refusalHeaders(error: ProtocolError): Record<string, string> {
  const headers: Record<string, string> = {};
  if (error.retryAfterSeconds !== undefined) headers['Retry-After'] = String(error.retryAfterSeconds);
  if (error.reason === 'body-too-large') headers.Connection = 'close';
  return headers;
}

/** Writes a JSON-RPC error response: the one place errors raised before a stream opens are written. */
export function writeProtocolError(res: StreamResponse, error: ProtocolError): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(refusalStatus(error), { 'Content-Type': 'application/json', ...refusalHeaders(error) });
  res.end(errorResponseJson(error));
}

const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** Whether a Content-Type header names JSON (`application/json`, `application/*+json`, parameters allowed). */
export function isJsonContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_CONTENT_TYPE.test(contentType);
}

const ACCEPTS_SSE = /(?:^|,)\s*(?:text\/event-stream|text\/\*|\*\/\*)\s*(?:;|,|$)/i;

/**
 * Content negotiation of a listen request, before its body is parsed: a body that is not JSON by its
 * Content-Type is refused (415), and so is a client that does not accept an event stream (406).
 * Absent headers are accepted.
 */
export function negotiate(headers: HeaderBag, body: unknown): void {
  const contentType = headers['content-type'];
  if (typeof contentType === 'string' && !isJsonContentType(contentType)) {
    throw new ProtocolError('unsupported-media-type', 'Unsupported Media Type: Content-Type must be application/json', {
      id: echoableId(body),
    });
  }
  const accept = headers.accept;
  if (typeof accept === 'string' && !ACCEPTS_SSE.test(accept)) {
    throw new ProtocolError('not-acceptable', 'Not Acceptable: the Accept header must list text/event-stream', {
      id: echoableId(body),
    });
  }
}

function methodOf(message: unknown): unknown {
  return typeof message === 'object' && message !== null && !Array.isArray(message)
    ? (message as { method?: unknown }).method
    : undefined;
}

/** Whether an `Mcp-Method` header names listen at all: alone, repeated, or among other methods. */
function headerNamesListen(value: string | readonly string[] | undefined): boolean {
  if (value === undefined) return false;
  const values = typeof value === 'string' ? [value] : value;
  return values.some((one) => one.split(',').some((part) => part.trim() === LISTEN_METHOD));
}

/**
 * Which of ours a request is, from its parsed body (or `undefined` when unparseable) and headers.
 * Listen is whatever names `subscriptions/listen` anywhere: the body's method (also inside a batch) or
 * the `Mcp-Method` header (also repeated or listing several). Every such request is ours, to serve or
 * to refuse (a header that differs from the body: -32020; a batch: -32600), and never goes on to the
 * MCP server behind, which might serve it unchecked.
 */
export function routeOf(body: unknown, headers: HeaderBag): 'listen' | 'cancelled' | 'other' {
  const method = methodOf(body);
  if (method === LISTEN_METHOD || headerNamesListen(headers['mcp-method'])) return 'listen';
  if (Array.isArray(body) && body.some((message) => methodOf(message) === LISTEN_METHOD)) return 'listen';
  if (method === CANCELLED_METHOD) return 'cancelled';
  return 'other';
}

/** A Node request as the adapters see it: maybe authenticated, maybe with a parsed body. */
export type NodeRequest = IncomingMessage & { auth?: unknown; user?: unknown; body?: unknown; _body?: boolean };

function stringField(value: unknown, ...names: string[]): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  for (const name of names) {
    const field = (value as Record<string, unknown>)[name];
    if (typeof field === 'string' && field !== '') return field;
  }
  return undefined;
}

/**
 * The default principal: `req.auth` as the SDK's `requireBearerAuth` sets it (`extra.sub`, else
 * `extra.principal`), else `req.user` as Passport sets it (a string, or its `id`, `sub` or
 * `username`). `undefined` for an anonymous caller.
 *
 * `req.auth.clientId` is deliberately not a fallback: it names the OAuth client (an app), not the
 * user, so every user of one client would share one principal, and with it their streams'
 * cancellation, task ownership and per-principal limit. A host whose tokens identify a client only
 * says so with the `principal` option.
 */
export function defaultPrincipal(req: object): string | undefined {
  // Any framework's request: the fields are read whether or not its types declare them.
  const { auth, user } = req as { readonly auth?: unknown; readonly user?: unknown };
  if (auth !== undefined && auth !== null) {
    return stringField((auth as { extra?: unknown }).extra, 'sub', 'principal');
  }
  if (typeof user === 'string' && user !== '') return user;
  return stringField(user, 'id', 'sub', 'username');
}

/**
 * Whether a body parser already consumed the request: the stream has ended (Express 5's parsers) or
 * `_body` is set (Express 4's). `req.body` alone says nothing: Express 4's parsers set `{}` even for a
 * Content-Type they skip.
 */
export function bodyWasParsed(req: NodeRequest): boolean {
  return req.readableEnded || req._body === true;
}

/** Leaves `body` where `express.json()` would have, so that the next handler (and parser) finds it. */
export function leaveParsedBody(req: NodeRequest, body: unknown): void {
  req.body = body;
  req._body = true;
}

/** A body over the limit: refused with 413 before any stream opens; the connection is not reused. */
export function bodyTooLarge(limit: number): ProtocolError {
  return new ProtocolError('body-too-large', `Request body exceeds ${limit} bytes`);
}

/**
 * Answers a body over the limit with 413 and `Connection: close`, reading none of the rest
 * ({@link closeUnreadAfterAnswer}).
 */
export function refuseOversizedBody(req: IncomingMessage, res: StreamResponse, error: ProtocolError): void {
  closeUnreadAfterAnswer(req);
  writeProtocolError(res, error);
}

/**
 * For a request answered with `Connection: close` while its body is still coming (a body over the
 * limit): the socket stops reading at once, and once the answer is written the connection is
 * half-closed (our FIN after the answer) and destroyed {@link OVERSIZED_BODY_LINGER_MS} later.
 * Destroying it as soon as the answer is flushed, as Node's server does, would reset the connection
 * (the unread body is still in the kernel), and at a client still sending, that reset discards the
 * answer before it is read. Meanwhile the unread body only fills the socket's buffers: TCP flow
 * control stops the sender. Call it before the answer is written (Fastify: from an `onError` hook).
 */
export function closeUnreadAfterAnswer(req: IncomingMessage): void {
  const socket = req.socket;
  socket.pause();
  // A body nobody started reading is dumped by Node's server once the answer is sent (read to its end,
  // discarded); a paused one that has started is not, and buffers at most its highWaterMark.
  if (req.readableFlowing === null) {
    req.resume();
    req.pause();
  } else {
    req.pause();
  }
  // Node's server destroys a `Connection: close` socket right after the answer is flushed
  // (`socket.destroySoon()`): on this socket, half-close and linger instead.
  Object.defineProperty(socket, 'destroySoon', {
    configurable: true,
    value: () => {
      socket.end();
      const timer = setTimeout(() => socket.destroy(), OVERSIZED_BODY_LINGER_MS);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    },
  });
}

function parseOrUndefined(text: Buffer | string): unknown {
  try {
    return JSON.parse(String(text)) as unknown;
  } catch {
    return undefined;
  }
}

/** How long a connection refused for its body size stays half-closed before it is destroyed. */
const OVERSIZED_BODY_LINGER_MS = 1000;

/** Reads the request stream, at most `limit` bytes; rejects with {@link bodyTooLarge} beyond. */
export function readRequestBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length']) > limit) {
      reject(bodyTooLarge(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.removeListener('data', onData);
      req.removeListener('end', onEnd);
      req.removeListener('error', onError);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // Not another byte is read: the caller answers 413 and closes the connection
        // (refuseOversizedBody), rather than draining a body of any size.
        req.pause();
        reject(bodyTooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** Every key of {@link NodeAdapterOptions}, checked against the interface by the compiler. */
export const NODE_ADAPTER_OPTION_KEYS = optionKeys<NodeAdapterOptions>({ principal: true, maxBodyBytes: true });

/** The body limit when an adapter reads the body itself: 4 MiB, as the SDK's own. */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * The principal a request is served as: the host's, or for an anonymous caller (`undefined`, `null`
 * or `''`) a fresh identity of this request's own (lib/principal.ts), so that anonymous callers never
 * share cancellation or task ownership. `undefined` when the host's `principal` returned something
 * that is no principal (not a string, or one with a NUL character, which anonymous identities
 * reserve): the host's mistake, refused rather than guessed at.
 */
export function resolvePrincipal(named: unknown): string | undefined {
  if (named === undefined || named === null || named === '') return anonymousPrincipal();
  if (typeof named !== 'string' || named.includes('\u0000')) return undefined;
  return named;
}

/** What {@link dispatchRequest} needs of an adapter, whatever read the body. */
export interface DispatchOptions<Req> {
  /** The engine. */
  readonly handler: ListenHandler<Req>;
  /**
   * The caller's principal; `undefined` (or `''`) for an anonymous caller, served under an identity
   * of its own per request (see {@link resolvePrincipal}).
   */
  readonly principalOf: (req: Req) => string | undefined;
  /** Called once a listen request is ours, right before the engine serves it. */
  readonly onListen?: (req: Req, body: unknown) => void;
}

/** How {@link serveNodeRequest} reads and routes a request. */
export interface NodeServeOptions<Req extends NodeRequest> extends DispatchOptions<Req> {
  /** Largest body read when no body parser ran; a larger one is answered 413. */
  readonly maxBodyBytes: number;
}

/** One request whose body is in (parsed, or its bytes), as {@link dispatchRequest} routes it. */
export interface DispatchInput<Req> {
  /** The framework's request: what `principalOf`, `onListen` and the engine's hooks are handed. */
  readonly request: Req;
  readonly headers: HeaderBag;
  /** The parsed body; `undefined` when there is none or it could not be parsed. */
  readonly body: unknown;
  /** The body's bytes, when they are all there is of it (read here, or kept by a raw parser). */
  readonly rawBody?: Buffer | string;
}

/** A framework's reply over Node's response, as Fastify's is: headers of its own until it sends. */
export interface WrappedReply {
  readonly raw: StreamResponse & { setHeader(name: string, value: number | string | readonly string[]): unknown };
  getHeaders(): Record<string, number | string | readonly string[] | undefined>;
  /** Tells the framework the handler answers on `raw` itself: it must neither answer after it nor touch it. */
  hijack(): unknown;
}

/**
 * Takes Node's response over from a framework's reply ({@link dispatchRequest}'s `claim`): the headers
 * the app's hooks set on the reply (CORS above all, `@fastify/cors` sets them there) are carried onto
 * Node's response, which they would never reach otherwise, and the reply is hijacked.
 */
export function takeOverReply(reply: WrappedReply): StreamResponse {
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(name, value);
  }
  reply.hijack();
  return reply.raw;
}

/**
 * The body fields of a {@link DispatchInput} from what a framework's parser left (Fastify's
 * `request.body`): the parsed body, or bytes a raw or text parser kept, parsed here for routing (the
 * engine parses them again, with its own errors).
 */
export function bodyInput(body: unknown): Pick<DispatchInput<unknown>, 'body' | 'rawBody'> {
  return Buffer.isBuffer(body) || typeof body === 'string' ? { body: parseOrUndefined(body), rawBody: body } : { body };
}

/**
 * Routes one request whose body is in, synchronously: `undefined` when it is not ours (the adapter
 * hands it on), else the serving of it, already started. `claim()` is called first, once, and returns
 * the Node response to write on (a framework that would answer after its handler is told not to there:
 * Fastify's `reply.hijack()`). Serves `subscriptions/listen`, and a `notifications/cancelled` naming
 * one of the caller's open streams (202). The promise never rejects (the engine's own promise).
 */
export function dispatchRequest<Req>(
  input: DispatchInput<Req>,
  options: DispatchOptions<Req>,
  claim: () => StreamResponse,
): Promise<void> | undefined {
  const { request, headers, body } = input;
  const route = routeOf(body, headers);
  if (route === 'other') return undefined;
  const named: unknown = options.principalOf(request);
  const principal = resolvePrincipal(named);
  if (principal === undefined) {
    options.handler.options.logger.error(
      `\`principal\` returned ${describeValue(named)}; expected a string without NUL characters, or undefined for an anonymous caller`,
    );
    options.handler.refused('internal');
    writeProtocolError(claim(), new ProtocolError('internal', 'Internal error', { id: echoableId(body) }));
    return Promise.resolve();
  }
  if (route === 'cancelled') {
    // An anonymous caller cannot prove the stream is its own, so it cancels nothing here: it closes its
    // listen response instead (HTTP cancellation). Its notification goes on to the host's MCP server.
    if (isAnonymous(principal) || !options.handler.cancel(principal, body)) return undefined;
    const res = claim();
    res.writeHead(202, {});
    res.end();
    return Promise.resolve();
  }
  options.onListen?.(request, body);
  const res = claim();
  return options.handler.handle(
    {
      ...(body !== undefined
        ? { body }
        : input.rawBody !== undefined
          ? { rawBody: input.rawBody }
          : { body: undefined }),
      headers,
      principal,
      request,
    },
    res,
  );
}

/**
 * The request handling of the adapters on Node's own request (Express, Nest's Express platform):
 * reads the body when no parser did and it may be ours (JSON, or `Mcp-Method` names listen), whatever
 * method the header names (a body naming listen under another header is refused here, by
 * {@link routeOf}, not passed on), then {@link dispatchRequest}. Resolves `'next'` for anything not
 * ours, with its body left where `express.json()` would leave it when this function had to read it.
 * A JSON-typed body it consumed that is not JSON is answered -32700 here: nobody after it could read
 * those bytes again. A client that hangs up before its body is in is served: nothing is left to
 * answer. Rejects only when reading the request stream fails while the client is still there.
 */
export async function serveNodeRequest<Req extends NodeRequest>(
  req: Req,
  res: StreamResponse,
  options: NodeServeOptions<Req>,
): Promise<'served' | 'next'> {
  const headerListen = headerNamesListen(req.headers['mcp-method']);
  const parsedBefore = bodyWasParsed(req);
  let body: unknown = parsedBefore ? req.body : undefined;
  let rawBody: Buffer | string | undefined;
  if (Buffer.isBuffer(body) || typeof body === 'string') {
    // A raw or text body parser ran: the engine parses the bytes, and routing reads them too, so that a
    // listen in them is not passed on unchecked (what goes on keeps the parser's body).
    rawBody = body;
    body = parseOrUndefined(rawBody);
  } else if (!parsedBefore) {
    if (!isJsonContentType(req.headers['content-type']) && !headerListen) return 'next';
    try {
      rawBody = await readRequestBody(req, options.maxBodyBytes);
    } catch (error) {
      if (hasErrorCode(error, ErrorCode.Protocol)) {
        // Counted as a listen refused only when its header named listen: other MCP requests are the host's.
        if (headerListen) options.handler.refused('body-too-large');
        refuseOversizedBody(req, res, error as ProtocolError);
        return 'served';
      }
      // The client hung up before its body was in (Node's `aborted`): there is nobody left to answer,
      // and a client gone is no failure of the host's, so it never reaches the host's error handling
      // (which would log a stack per abandoned request, at the client's whim).
      if (res.destroyed || req.socket.destroyed) return 'served';
      throw error;
    }
    try {
      body = JSON.parse(rawBody.toString()) as unknown;
    } catch {
      if (!headerListen) {
        writeProtocolError(res, new ProtocolError('parse-error', 'Parse error: the request body is not valid JSON'));
        return 'served';
      }
    }
  }

  // The adapter's options are the dispatch options as they are: nothing is allocated per request for them.
  const serving = dispatchRequest(
    { request: req, headers: req.headers, body, ...(rawBody !== undefined ? { rawBody } : {}) },
    options,
    () => res,
  );
  if (serving === undefined) {
    if (!parsedBefore && body !== undefined) leaveParsedBody(req, body);
    return 'next';
  }
  // Ours to the end: the response (and so an open stream) references this request, so a large filter
  // must not stay pinned on it for the stream's lifetime; the engine has its body already. (Only a body
  // a parser left there: adding the property would cost the request a new hidden class.)
  if (parsedBefore) req.body = undefined;
  await serving;
  return 'served';
}

/** How {@link serveFetchRequest} reads and routes a request. */
export interface FetchServeOptions<Req> extends DispatchOptions<Req> {
  /** Largest body read; a larger JSON body is answered 413 (it may be a listen, so it is not passed on). */
  readonly maxBodyBytes: number;
}

/**
 * What {@link serveFetchRequest} made of a request: the `Response` when it was ours, else the body it
 * parsed (`undefined` when it read none, or could not parse it) for whoever comes next.
 */
export type FetchServed =
  { readonly response: Response; readonly body?: undefined } | { readonly response: undefined; readonly body: unknown };

/** A fetch `Headers` as the engine reads headers: lower-case names, repeated ones joined with `, `. */
export function headerBagOf(headers: Headers): Record<string, string> {
  const bag: Record<string, string> = {};
  headers.forEach((value, name) => {
    bag[name] = value;
  });
  return bag;
}

/** A refusal answered before any stream, as a fetch `Response`: written by {@link writeProtocolError}. */
function protocolErrorResponse(error: ProtocolError): Promise<Response> {
  const res = new WebStreamResponse();
  writeProtocolError(res, error);
  return res.response;
}

/**
 * Reads a fetch request's body as text, at most `limit` bytes, from a clone: the request's own body
 * stays readable by whoever the request is passed on to. Rejects with {@link bodyTooLarge} beyond the
 * limit, read no further (a declared `Content-Length` over it is refused before reading anything).
 */
export async function readFetchBody(request: Request, limit: number): Promise<string> {
  if (Number(request.headers.get('content-length')) > limit) throw bodyTooLarge(limit);
  const stream = request.clone().body as ReadableStream<Uint8Array> | null;
  if (stream === null) return '';
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      // Not another byte is read for the clone: the caller answers 413.
      reader.cancel().catch(() => undefined);
      throw bodyTooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size).toString();
}

/**
 * The request handling of the web-standard fetch face (`mcp-subscriptions/fetch`, Hono): the
 * counterpart of {@link serveNodeRequest} on a `Request`. A POST whose body may be ours (JSON, or
 * `Mcp-Method` names listen) is read from a clone, so that the request goes on intact when it is not
 * ours; then {@link dispatchRequest}. `req` is what the engine's hooks and `principalOf` are handed
 * (the `Request` itself, or a framework's context); `parsed`, a body a framework already parsed.
 *
 * Unlike on Node's request, a body that is not JSON is passed on rather than answered -32700 here
 * (whoever comes next can read the bytes again), unless `Mcp-Method` names listen. A JSON body over
 * the limit is refused with 413, as on Node: it may be a listen, which must not go on unchecked.
 * Never rejects but when reading the body fails while the client is still there.
 */
export async function serveFetchRequest<Req>(
  request: Request,
  req: Req,
  options: FetchServeOptions<Req>,
  parsed?: { readonly body: unknown },
): Promise<FetchServed> {
  if (request.method !== 'POST') return { response: undefined, body: parsed?.body };
  const headers = headerBagOf(request.headers);
  const headerListen = headerNamesListen(headers['mcp-method']);
  let body: unknown;
  let rawBody: Buffer | string | undefined;
  if (parsed !== undefined) {
    // What a framework's parser left: a parsed body, or the bytes of a raw or text parser (parsed here for routing).
    ({ body, rawBody } = bodyInput(parsed.body));
  } else {
    if (!isJsonContentType(headers['content-type']) && !headerListen) return { response: undefined, body: undefined };
    try {
      rawBody = await readFetchBody(request, options.maxBodyBytes);
    } catch (error) {
      if (hasErrorCode(error, ErrorCode.Protocol)) {
        // Counted as a listen refused only when its header named listen: other MCP requests are the host's.
        if (headerListen) options.handler.refused('body-too-large');
        return { response: await protocolErrorResponse(error as ProtocolError) };
      }
      // The client left before its body was in: nobody is left to answer.
      if (request.signal.aborted) return { response: new Response(null, { status: CLOSED_BEFORE_HEAD_STATUS }) };
      throw error;
    }
    body = parseOrUndefined(rawBody);
  }
  const res = new WebStreamResponse(request.signal);
  const serving = dispatchRequest(
    { request: req, headers, body, ...(rawBody !== undefined ? { rawBody } : {}) },
    options,
    () => res,
  );
  if (serving === undefined) return { response: undefined, body };
  // Ours to the end: the request's own copy of the body (the clone's twin) is let go, so that an open
  // stream does not pin it. Its source was read to the end, so nothing reaches the client's connection.
  if (parsed === undefined && request.body !== null && !request.bodyUsed) request.body.cancel().catch(() => undefined);
  return { response: await res.responseOf(serving) };
}
