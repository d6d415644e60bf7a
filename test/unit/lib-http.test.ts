/**
 * Everything HTTP about listen (lib/http.ts), without a socket: the refusal table keyed by reason and
 * the responses written from it, content negotiation, the default principal, reading the body (limits,
 * chunks, a body a parser already read, bad JSON, a Content-Type that is not ours), and the routing of
 * listen, `notifications/cancelled` and everything else. Requests are `PassThrough` streams carrying the
 * fields http.ts reads (headers, a socket, `body`/`_body`); responses are the fake of fake-response.ts.
 */
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, test } from '@jest/globals';
import { ErrorCode, SubscriptionHub } from 'mcp-subscriptions';
import {
  bodyTooLarge,
  bodyWasParsed,
  createListenHandler,
  DEFAULT_MAX_BODY_BYTES,
  defaultPrincipal,
  isJsonContentType,
  leaveParsedBody,
  negotiate,
  ProtocolError,
  readRequestBody,
  refusalHeaders,
  refusalStatus,
  REFUSAL_STATUS,
  routeOf,
  RpcErrorCode,
  serveNodeRequest,
  writeProtocolError,
  type NodeRequest,
  type RefusalReason,
} from '../../lib/internal.ts';
import { FakeResponse, recordingLogger, settle } from '../helpers/fake-response.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

/** The refusals, each with its HTTP status and JSON-RPC code (spec §6, plus the HTTP layer's own). */
const REFUSALS: Record<RefusalReason, { status: number; rpc: number }> = {
  'parse-error': { status: 400, rpc: RpcErrorCode.ParseError },
  'invalid-request': { status: 400, rpc: RpcErrorCode.InvalidRequest },
  'unsupported-media-type': { status: 415, rpc: RpcErrorCode.InvalidRequest },
  'not-acceptable': { status: 406, rpc: RpcErrorCode.InvalidRequest },
  'body-too-large': { status: 413, rpc: RpcErrorCode.InvalidRequest },
  'invalid-params': { status: 400, rpc: RpcErrorCode.InvalidParams },
  'header-mismatch': { status: 400, rpc: RpcErrorCode.HeaderMismatch },
  'unsupported-protocol-version': { status: 400, rpc: RpcErrorCode.UnsupportedProtocolVersion },
  'method-not-found': { status: 404, rpc: RpcErrorCode.MethodNotFound },
  'missing-capability': { status: 400, rpc: RpcErrorCode.MissingRequiredClientCapability },
  capacity: { status: 503, rpc: RpcErrorCode.InternalError },
  draining: { status: 503, rpc: RpcErrorCode.InternalError },
  'shutting-down': { status: 503, rpc: RpcErrorCode.InternalError },
  internal: { status: 500, rpc: RpcErrorCode.InternalError },
};

/** The socket of a fake request: what refuseOversizedBody and a hang-up touch. */
class FakeSocket extends EventEmitter {
  paused = false;
  destroyed = false;
  ended = false;
  pause(): this {
    this.paused = true;
    return this;
  }
  end(): this {
    this.ended = true;
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

interface RequestInit {
  readonly headers?: Record<string, string>;
  /** Written at once; the request ends after them unless `open`. */
  readonly chunks?: readonly (string | Buffer)[];
  readonly open?: boolean;
  readonly auth?: unknown;
  readonly user?: unknown;
}

/** A Node request as http.ts sees one: a readable body, headers and a socket. */
function nodeRequest(init: RequestInit = {}): NodeRequest & { body$: PassThrough; socket: FakeSocket } {
  const body$ = new PassThrough();
  const req = Object.assign(body$, {
    headers: { ...(init.headers ?? {}) },
    socket: new FakeSocket(),
    body$,
    ...(init.auth !== undefined ? { auth: init.auth } : {}),
    ...(init.user !== undefined ? { user: init.user } : {}),
  });
  for (const chunk of init.chunks ?? []) body$.write(chunk);
  if (init.open !== true) body$.end();
  return req as unknown as NodeRequest & { body$: PassThrough; socket: FakeSocket };
}

/** A listen request as JSON text, split into `parts` chunks. */
function listenChunks(id: string | number, parts = 1): string[] {
  const text = JSON.stringify(listenBody(id, { toolsListChanged: true }));
  const size = Math.ceil(text.length / parts);
  return Array.from({ length: parts }, (_, i) => text.slice(i * size, (i + 1) * size));
}

const hubs: SubscriptionHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

function engine() {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger });
  hubs.push(hub);
  const handler = createListenHandler<NodeRequest>({
    hub,
    capabilities: { toolsListChanged: true },
    keepAliveMs: false,
    logger,
  });
  const serve = (req: NodeRequest, res: FakeResponse, options: { principal?: unknown; maxBodyBytes?: number } = {}) =>
    serveNodeRequest(req, res, {
      handler,
      principalOf: () => ('principal' in options ? options.principal : 'alice') as string | undefined,
      maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    });
  return { hub, handler, logger, serve };
}

function errorOf(res: FakeResponse): any {
  return JSON.parse(res.text);
}

function ackOf(res: FakeResponse): any {
  const [ack] = res.messages();
  expect(ack?.method).toBe('notifications/subscriptions/acknowledged');
  return ack;
}

describe('the refusal table', () => {
  test('every reason has its status, and the JSON-RPC code its ProtocolError carries', () => {
    expect({ ...REFUSAL_STATUS }).toStrictEqual(
      Object.fromEntries(Object.entries(REFUSALS).map(([reason, { status }]) => [reason, status])),
    );
    expect(Object.isFrozen(REFUSAL_STATUS)).toBe(true);
    for (const [reason, { status, rpc }] of Object.entries(REFUSALS) as [
      RefusalReason,
      (typeof REFUSALS)[RefusalReason],
    ][]) {
      const error = new ProtocolError(reason, `refused: ${reason}`);
      expect({ reason, status: refusalStatus(error), rpc: error.rpcCode }).toStrictEqual({ reason, status, rpc });
    }
  });

  test('extra headers: Retry-After when the refusal names one, Connection: close for a body too large, else none', () => {
    for (const reason of Object.keys(REFUSALS) as RefusalReason[]) {
      const expected = reason === 'body-too-large' ? { Connection: 'close' } : {};
      expect({ reason, headers: refusalHeaders(new ProtocolError(reason, 'x')) }).toStrictEqual({
        reason,
        headers: expected,
      });
    }
    expect(refusalHeaders(new ProtocolError('capacity', 'x', { retryAfterSeconds: 7 }))).toStrictEqual({
      'Retry-After': '7',
    });
    expect(refusalHeaders(new ProtocolError('shutting-down', 'x', { retryAfterSeconds: 0 }))).toStrictEqual({
      'Retry-After': '0',
    });
  });

  test('writeProtocolError writes each refusal with its status, JSON type, extra headers and JSON-RPC error', () => {
    for (const [reason, { status, rpc }] of Object.entries(REFUSALS) as [
      RefusalReason,
      (typeof REFUSALS)[RefusalReason],
    ][]) {
      const res = new FakeResponse();
      const retry =
        reason === 'capacity' || reason === 'draining' || reason === 'shutting-down' ? { retryAfterSeconds: 3 } : {};
      writeProtocolError(res, new ProtocolError(reason, `Refused (${reason})`, { id: `req-${reason}`, ...retry }));
      expect({
        reason,
        status: res.statusCode,
        headers: res.headers,
        body: errorOf(res),
        ended: res.writableEnded,
      }).toStrictEqual({
        reason,
        status,
        headers: {
          'Content-Type': 'application/json',
          ...(reason === 'body-too-large' ? { Connection: 'close' } : {}),
          ...('retryAfterSeconds' in retry ? { 'Retry-After': '3' } : {}),
        },
        body: { jsonrpc: '2.0', id: `req-${reason}`, error: { code: rpc, message: `Refused (${reason})` } },
        ended: true,
      });
      expect(res.violations).toStrictEqual([]);
    }
  });

  test('writeProtocolError carries data, echoes a null id, and writes nothing once headers are out or the response is gone', () => {
    const res = new FakeResponse();
    writeProtocolError(res, new ProtocolError('invalid-params', 'Bad', { data: { field: 'x' } }));
    expect(errorOf(res)).toStrictEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32602, message: 'Bad', data: { field: 'x' } },
    });

    const started = new FakeResponse();
    started.writeHead(200, {});
    writeProtocolError(started, new ProtocolError('internal', 'Internal error'));
    expect(started.statusCode).toBe(200);
    expect(started.text).toBe('');
    expect(started.violations).toStrictEqual([]);

    const gone = new FakeResponse();
    gone.clientClose();
    writeProtocolError(gone, new ProtocolError('internal', 'Internal error'));
    expect(gone.headersSent).toBe(false);
    expect(gone.violations).toStrictEqual([]);
  });
});

describe('content negotiation', () => {
  test('isJsonContentType: application/json and application/*+json, with parameters, any case', () => {
    const yes = [
      'application/json',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/vnd.api+json',
      'application/json ;charset=utf-8',
    ];
    const no = [
      undefined,
      '',
      'text/json',
      'application/jsonx',
      'application/json-patch',
      'text/plain',
      'application/x-www-form-urlencoded',
      ' application/json',
    ];
    expect(yes.filter((type) => !isJsonContentType(type))).toStrictEqual([]);
    expect(no.filter((type) => isJsonContentType(type))).toStrictEqual([]);
  });

  test('a Content-Type that is not JSON is refused with 415; absent headers are accepted', () => {
    expect(() => negotiate({}, undefined)).not.toThrow();
    const error = thrownBy(() => negotiate({ 'content-type': 'text/plain' }, { id: 'x' }));
    expect(error).toMatchObject({ code: ErrorCode.Protocol, reason: 'unsupported-media-type', id: 'x' });
    expect(refusalStatus(error)).toBe(415);
  });

  test('an Accept that lists no event stream is refused with 406; text/*, */* and a list naming it are accepted', () => {
    for (const accept of [
      'text/event-stream',
      'application/json, text/event-stream',
      'text/*',
      '*/*',
      'text/event-stream;q=0.5',
      'application/json,text/event-stream ;q=1',
    ]) {
      expect({ accept, thrown: thrownBy(() => negotiate({ accept }, {}), false) }).toStrictEqual({
        accept,
        thrown: undefined,
      });
    }
    for (const accept of ['application/json', 'text/html', 'text/event-streams', 'application/*', '']) {
      const error = thrownBy(() => negotiate({ accept }, { id: 4 }));
      expect({ accept, reason: error.reason, id: error.id, status: refusalStatus(error) }).toStrictEqual({
        accept,
        reason: 'not-acceptable',
        id: 4,
        status: 406,
      });
    }
  });

  test('the Content-Type is judged before Accept', () => {
    expect(thrownBy(() => negotiate({ 'content-type': 'text/plain', accept: 'text/html' }, {})).reason).toBe(
      'unsupported-media-type',
    );
  });
});

function thrownBy(fn: () => unknown): ProtocolError;
function thrownBy(fn: () => unknown, required: false): ProtocolError | undefined;
function thrownBy(fn: () => unknown, required = true): ProtocolError | undefined {
  try {
    fn();
  } catch (error) {
    return error as ProtocolError;
  }
  if (required) throw new Error('expected a throw');
  return undefined;
}

describe('routing and the caller', () => {
  test('routeOf: listen by body, by any Mcp-Method value or inside a batch; cancelled by body; anything else is other', () => {
    const cases: [unknown, Record<string, string>, string][] = [
      [{ method: 'subscriptions/listen' }, {}, 'listen'],
      [undefined, { 'mcp-method': 'subscriptions/listen' }, 'listen'],
      [{ method: 'tools/list' }, { 'mcp-method': 'subscriptions/listen' }, 'listen'],
      [{ method: 'notifications/cancelled' }, {}, 'cancelled'],
      [{ method: 'tools/list' }, {}, 'other'],
      // A batch that holds a listen is ours to refuse (-32600), never passed on unchecked.
      [[{ method: 'subscriptions/listen' }], {}, 'listen'],
      [[{ method: 'tools/list' }], {}, 'other'],
      [{ method: 'tools/list' }, { 'mcp-method': 'tools/list, subscriptions/listen' }, 'listen'],
      [null, {}, 'other'],
      ['subscriptions/listen', {}, 'other'],
      [undefined, { 'mcp-method': 'notifications/cancelled' }, 'other'],
    ];
    for (const [body, headers, route] of cases) {
      expect({ body, headers, route: routeOf(body, headers) }).toStrictEqual({ body, headers, route });
    }
  });

  test('defaultPrincipal: req.auth.extra (sub, then principal), else req.user (a string, id, sub, username)', () => {
    expect(defaultPrincipal({ auth: { extra: { sub: 'a', principal: 'b' } } })).toBe('a');
    expect(defaultPrincipal({ auth: { extra: { principal: 'b' } } })).toBe('b');
    expect(defaultPrincipal({ auth: { extra: { sub: '', principal: 'b' } } })).toBe('b');
    // The OAuth client is not the user: never a fallback. And req.auth, when set, decides alone.
    expect(defaultPrincipal({ auth: { clientId: 'app', extra: {} }, user: 'u' })).toBeUndefined();
    expect(defaultPrincipal({ user: 'u' })).toBe('u');
    expect(defaultPrincipal({ user: { id: 'i', sub: 's', username: 'n' } })).toBe('i');
    expect(defaultPrincipal({ user: { sub: 's', username: 'n' } })).toBe('s');
    expect(defaultPrincipal({ user: { username: 'n' } })).toBe('n');
    expect(defaultPrincipal({ user: { id: 7 } })).toBeUndefined();
    expect(defaultPrincipal({ user: '' })).toBeUndefined();
    expect(defaultPrincipal({})).toBeUndefined();
  });

  test('bodyWasParsed: by Express 4’s _body or an ended stream, never by req.body alone; leaveParsedBody sets both', async () => {
    const fresh = nodeRequest({ chunks: ['{}'] });
    fresh.body = {};
    expect(bodyWasParsed(fresh)).toBe(false);
    leaveParsedBody(fresh, { parsed: true });
    expect(bodyWasParsed(fresh)).toBe(true);
    expect(fresh.body).toStrictEqual({ parsed: true });

    const consumed = nodeRequest({ chunks: ['{}'] });
    consumed.resume();
    await new Promise((resolve) => consumed.once('end', resolve));
    expect(bodyWasParsed(consumed)).toBe(true);
  });
});

describe('readRequestBody', () => {
  test('reads every chunk, as they come, into one buffer', async () => {
    const req = nodeRequest({ open: true });
    const read = readRequestBody(req, 100);
    for (const part of ['{"a":', '1,', '"é":2}']) {
      req.body$.write(part);
      await settle();
    }
    req.body$.end();
    expect((await read).toString()).toBe('{"a":1,"é":2}');
    expect(req.listenerCount('data')).toBe(0);
    expect(req.listenerCount('end')).toBe(0);
    expect(req.listenerCount('error')).toBe(0);
  });

  test('a body of exactly the limit is read; one byte more is refused as body-too-large, and reading stops', async () => {
    expect((await readRequestBody(nodeRequest({ chunks: ['x'.repeat(10)] }), 10)).length).toBe(10);
    const req = nodeRequest({ chunks: ['x'.repeat(6)], open: true });
    const read = readRequestBody(req, 10);
    req.body$.write('y'.repeat(5));
    const error = await read.then(
      () => undefined,
      (e: unknown) => e as ProtocolError,
    );
    expect(error).toMatchObject({ code: ErrorCode.Protocol, reason: 'body-too-large' });
    expect(error?.message).toBe('Request body exceeds 10 bytes');
    expect(req.isPaused()).toBe(true);
    expect(req.listenerCount('data')).toBe(0);
  });

  test('a Content-Length over the limit is refused before a byte is read', async () => {
    const req = nodeRequest({ headers: { 'content-length': '11' }, chunks: ['x'] });
    await expect(readRequestBody(req, 10)).rejects.toMatchObject({ reason: 'body-too-large' });
    expect(req.readableFlowing).toBe(null); // never started reading
  });

  test('a stream error rejects with that error', async () => {
    const req = nodeRequest({ open: true });
    const read = readRequestBody(req, 100);
    const failure = new Error('aborted');
    req.body$.destroy(failure);
    await expect(read).rejects.toBe(failure);
  });

  test('bodyTooLarge names the limit and is refused with 413 and Connection: close', () => {
    const error = bodyTooLarge(4096);
    expect(error.message).toBe('Request body exceeds 4096 bytes');
    expect(refusalStatus(error)).toBe(413);
    expect(refusalHeaders(error)).toStrictEqual({ Connection: 'close' });
  });
});

describe('serveNodeRequest', () => {
  test('a listen whose body it reads, in several chunks, is served: the stream is acknowledged', async () => {
    const { serve, hub } = engine();
    const req = nodeRequest({ headers: listenHeaders(), chunks: listenChunks('chunked', 5) });
    const res = new FakeResponse();
    expect(await serve(req, res)).toBe('served');
    expect(res.statusCode).toBe(200);
    expect(ackOf(res).params._meta['io.modelcontextprotocol/subscriptionId']).toBe('chunked');
    expect(hub.stats().openStreams).toBe(1);
  });

  test('a body a parser already read is used as it is, and let go of once the stream is open', async () => {
    const { serve } = engine();
    // Express 4: `_body` set, the stream never read.
    const express4 = nodeRequest({ headers: listenHeaders(), open: true });
    leaveParsedBody(express4, listenBody('parsed-4', { toolsListChanged: true }));
    const res4 = new FakeResponse();
    expect(await serve(express4, res4)).toBe('served');
    expect(ackOf(res4).params._meta['io.modelcontextprotocol/subscriptionId']).toBe('parsed-4');
    expect(express4.body).toBeUndefined();
    expect(express4.readableFlowing).toBe(null);

    // Express 5: the stream ended, req.body set.
    const express5 = nodeRequest({ headers: listenHeaders(), chunks: ['ignored'] });
    express5.resume();
    await new Promise((resolve) => express5.once('end', resolve));
    express5.body = listenBody('parsed-5', { toolsListChanged: true });
    const res5 = new FakeResponse();
    expect(await serve(express5, res5)).toBe('served');
    expect(ackOf(res5).params._meta['io.modelcontextprotocol/subscriptionId']).toBe('parsed-5');
  });

  test('a raw or text body a parser left is handed to the engine as bytes', async () => {
    const { serve } = engine();
    for (const raw of [Buffer.from(listenChunks('raw')[0]!), listenChunks('text')[0]!]) {
      const req = nodeRequest({ headers: listenHeaders() });
      leaveParsedBody(req, raw);
      const res = new FakeResponse();
      expect(await serve(req, res)).toBe('served');
      expect(ackOf(res).params._meta['io.modelcontextprotocol/subscriptionId']).toBe(
        typeof raw === 'string' ? 'text' : 'raw',
      );
    }
  });

  test('a body that is not JSON by its Content-Type, without Mcp-Method, is not ours: next, the stream unread', async () => {
    const { serve } = engine();
    const req = nodeRequest({ headers: { 'content-type': 'text/plain' }, chunks: listenChunks('x') });
    const res = new FakeResponse();
    expect(await serve(req, res)).toBe('next');
    expect(req.readableFlowing).toBe(null);
    expect(req._body).toBeUndefined();
    expect(res.headersSent).toBe(false);
  });

  test('a wrong Content-Type with Mcp-Method: subscriptions/listen is read and refused with 415', async () => {
    const { serve } = engine();
    const req = nodeRequest({ headers: listenHeaders({ 'content-type': 'text/plain' }), chunks: listenChunks(9) });
    const res = new FakeResponse();
    expect(await serve(req, res)).toBe('served');
    expect(res.statusCode).toBe(415);
    expect(errorOf(res)).toMatchObject({ id: 9, error: { code: RpcErrorCode.InvalidRequest } });
  });

  test('bad JSON: -32700 with 400 here when the request may be anyone’s; the engine’s own -32700 for a listen', async () => {
    const { serve } = engine();
    for (const headers of [{ 'content-type': 'application/json' }, listenHeaders()]) {
      const req = nodeRequest({ headers, chunks: ['{"jsonrpc":"2.0",'] });
      const res = new FakeResponse();
      expect(await serve(req, res)).toBe('served');
      expect({ headers, status: res.statusCode, body: errorOf(res) }).toStrictEqual({
        headers,
        status: 400,
        body: { jsonrpc: '2.0', id: null, error: { code: RpcErrorCode.ParseError, message: expect.any(String) } },
      });
    }
  });

  test('a JSON request that is not ours goes next, its body left where express.json() leaves it', async () => {
    const { serve } = engine();
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    const req = nodeRequest({ headers: { 'content-type': 'application/json' }, chunks: [JSON.stringify(body)] });
    const res = new FakeResponse();
    expect(await serve(req, res)).toBe('next');
    expect(req.body).toStrictEqual(body);
    expect(req._body).toBe(true);
    expect(res.headersSent).toBe(false);
  });

  test('a body over maxBodyBytes is answered 413 with Connection: close, the socket paused and half-closed', async () => {
    const { serve, hub } = engine();
    const req = nodeRequest({ headers: listenHeaders(), chunks: ['x'.repeat(64)], open: true });
    const res = new FakeResponse();
    expect(await serve(req, res, { maxBodyBytes: 32 })).toBe('served');
    expect(res.statusCode).toBe(413);
    expect(res.headers).toStrictEqual({ 'Content-Type': 'application/json', Connection: 'close' });
    expect(errorOf(res).error).toStrictEqual({
      code: RpcErrorCode.InvalidRequest,
      message: 'Request body exceeds 32 bytes',
    });
    expect(req.socket.paused).toBe(true);
    // Node's server calls destroySoon() once the answer is out: here it half-closes and lingers.
    (req.socket as unknown as { destroySoon: () => void }).destroySoon();
    expect(req.socket.ended).toBe(true);
    expect(req.socket.destroyed).toBe(false);
    req.socket.emit('close');
    expect(hub.stats().opened).toBe(0);
  });

  test('a client that hangs up before its body is in is served (nobody to answer); a read error with the client there rejects', async () => {
    const { serve } = engine();
    const gone = nodeRequest({ headers: listenHeaders(), chunks: ['{"jsonrpc":'], open: true });
    const goneRes = new FakeResponse();
    const served = serve(gone, goneRes);
    await settle();
    gone.socket.destroyed = true;
    gone.body$.destroy(new Error('aborted'));
    expect(await served).toBe('served');
    expect(goneRes.headersSent).toBe(false);

    const broken = nodeRequest({ headers: listenHeaders(), open: true });
    const failure = new Error('read failed');
    const rejected = serve(broken, new FakeResponse());
    await settle();
    broken.body$.destroy(failure);
    await expect(rejected).rejects.toBe(failure);
  });

  test('a principal that is no principal is answered 500 and logged; an anonymous caller is served', async () => {
    const { serve, logger } = engine();
    for (const principal of [42, 'a\u0000b', {}]) {
      const res = new FakeResponse();
      expect(
        await serve(nodeRequest({ headers: listenHeaders(), chunks: listenChunks('p') }), res, { principal }),
      ).toBe('served');
      expect({ principal, status: res.statusCode, error: errorOf(res).error.code }).toStrictEqual({
        principal,
        status: 500,
        error: RpcErrorCode.InternalError,
      });
    }
    expect(logger.errors.map(([message]) => message)).toStrictEqual([
      expect.stringMatching(/`principal` returned `42` \(number\)/),
      expect.stringMatching(/`principal` returned/),
      expect.stringMatching(/`principal` returned `object` \(object\)/),
    ]);
    for (const principal of [undefined, null, '']) {
      const res = new FakeResponse();
      await serve(nodeRequest({ headers: listenHeaders(), chunks: listenChunks('anon') }), res, { principal });
      expect({ principal, status: res.statusCode }).toStrictEqual({ principal, status: 200 });
    }
  });

  test('notifications/cancelled for the caller’s own stream: 202; for no stream of theirs, or anonymously: next', async () => {
    const { serve, hub, handler } = engine();
    const stream = new FakeResponse();
    await serve(nodeRequest({ headers: listenHeaders(), chunks: listenChunks('to-cancel') }), stream);
    expect(hub.stats().openStreams).toBe(1);
    const cancelBody = (requestId: string) =>
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } });
    const headers = { 'content-type': 'application/json' };

    const notMine = nodeRequest({ headers, chunks: [cancelBody('to-cancel')] });
    expect(await serve(notMine, new FakeResponse(), { principal: 'bob' })).toBe('next');
    expect(notMine.body).toMatchObject({ method: 'notifications/cancelled' });
    // An anonymous caller cannot prove a stream is its own: the engine is not even asked.
    const asked: string[] = [];
    const anonymous = nodeRequest({ headers, chunks: [cancelBody('to-cancel')] });
    const watched = {
      ...handler,
      cancel: (principal: string, body: unknown) => {
        asked.push(principal);
        return handler.cancel(principal, body);
      },
    };
    expect(
      await serveNodeRequest(anonymous, new FakeResponse(), {
        handler: watched,
        principalOf: () => undefined,
        maxBodyBytes: 1000,
      }),
    ).toBe('next');
    expect(asked).toStrictEqual([]);
    const unknown = nodeRequest({ headers, chunks: [cancelBody('no-such-stream')] });
    expect(await serve(unknown, new FakeResponse())).toBe('next');
    expect(hub.stats().openStreams).toBe(1);

    const mine = new FakeResponse();
    expect(await serve(nodeRequest({ headers, chunks: [cancelBody('to-cancel')] }), mine)).toBe('served');
    expect(mine.statusCode).toBe(202);
    expect(mine.writableEnded).toBe(true);
    expect(mine.text).toBe('');
    expect(hub.stats().openStreams).toBe(0);
    expect(stream.destroyed).toBe(true);
  });

  test('onListen is called once a listen is known to be ours, with its body, before the engine serves it', async () => {
    const { handler } = engine();
    const seen: unknown[] = [];
    const req = nodeRequest({ headers: listenHeaders(), chunks: listenChunks('seen') });
    const res = new FakeResponse();
    await serveNodeRequest(req, res, {
      handler,
      principalOf: () => 'alice',
      maxBodyBytes: 1000,
      onListen: (_req, body) => seen.push({ body, headersSent: res.headersSent }),
    });
    expect(seen).toStrictEqual([{ body: listenBody('seen', { toolsListChanged: true }), headersSent: false }]);
    const other = nodeRequest({ headers: { 'content-type': 'application/json' }, chunks: ['{"method":"tools/list"}'] });
    await serveNodeRequest(other, new FakeResponse(), {
      handler,
      principalOf: () => 'alice',
      maxBodyBytes: 1000,
      onListen: () => seen.push('other'),
    });
    expect(seen).toHaveLength(1);
  });
});
