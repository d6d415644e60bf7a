/**
 * The ceiling: the best a bare `node:http` server can do for the work the benchmark's listen streams
 * ask of a server, so that every "× ceiling" figure compares the library with a real bar.
 *
 * The same work as the host app: it authenticates the caller (the host's bearer check), parses the
 * body, bounds the filter (1,000 entries), runs the same read check and subscribe hook per URI, writes
 * the acknowledgement, and per event writes the very bytes the engine and the SDK write. Its write
 * route parses the body and publishes.
 *
 * Done the cheapest way there is: no framework, no hub, no queue, one shared keepalive timer; frames
 * are pre-serialized once per publish with a hole for the stream's id; responses sit in plain arrays
 * (one for tool-list listeners, one per URI). And it batches where the library batches
 * (`ListenStream.deliver` in `lib/listen-stream.ts`): the frames a stream gets in one tick are
 * appended to its pending string and written with one write at the end of the tick, or at once
 * when the string reaches the library's 16 KiB bound. The end of the tick is one microtask for every
 * stream with a pending batch, as in the library. And it writes where the library writes: after the
 * acknowledgement (through `res.write`, which sends the headers), each batch goes to the socket as
 * an HTTP/1.1 chunk of its own (`ListenStream.write`), which skips Node's response write path.
 *
 * What it does not do, and why that is still the fair bar: it ignores backpressure (no queue, no
 * coalescing, no stall timer) and so writes every frame of every event, where the library may merge
 * identical events for a socket that pushes back. It never does less writing than the library, only
 * less bookkeeping. Usage: `node --expose-gc ... ceiling.ts [express|fastify]`.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { AuthInfo } from '@modelcontextprotocol/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, principalOf, toAuthInfo } from '../../sample-app/shared/auth.ts';
import { acceptsSubscription, canRead, noteUri } from '../../sample-app/shared/notes-service.ts';
import { serveControl, startServer, type ControlTarget } from '../lib/control.ts';
import {
  ackFrame,
  KEEPALIVE_FRAME,
  resourceFrame,
  SSE_HEADERS,
  TOOLS_FRAME,
  type Filter,
  type SplitFrame,
} from '../lib/wire.ts';

/** The same bound on filter entries as the engine's default `maxFilterEntries`. */
const MAX_FILTER_ENTRIES = 1000;
const KEEPALIVE_MS = 15_000;
/**
 * A stream's batch is written early once it reaches this many characters: the value of
 * `PENDING_FLUSH_CHARS` in `lib/listen-stream.ts` (not exported), a socket's high-water mark.
 */
const PENDING_FLUSH_CHARS = 16_384;

interface Stream {
  readonly res: ServerResponse;
  /** The response's socket: batches are written to it as chunks, as the library does. */
  readonly socket: Socket;
  readonly idJson: string;
  readonly uris: readonly string[];
  readonly tools: boolean;
  /** Frames of the current tick, not yet written. */
  pending: string;
}

const all: Stream[] = [];
const tools: Stream[] = [];
const byUri = new Map<string, Stream[]>();

function remove(list: Stream[], stream: Stream): void {
  const index = list.indexOf(stream);
  if (index !== -1) list.splice(index, 1);
}

/** Streams with a pending batch, written by one microtask at the end of the tick. */
let dirty: Stream[] = [];

function flushDirty(): void {
  const streams = dirty;
  dirty = [];
  for (const stream of streams) {
    const text = stream.pending;
    if (text === '') continue; // written early (the bound), or closed
    stream.pending = '';
    writeChunk(stream, text);
  }
}

/** One HTTP/1.1 chunk straight to the socket (backpressure is ignored, as everywhere in the ceiling). */
function writeChunk(stream: Stream, text: string): void {
  stream.socket.write(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`);
}

function write(list: readonly Stream[] | undefined, frame: SplitFrame): void {
  if (list === undefined) return;
  for (const stream of list) {
    if (stream.pending === '') {
      if (dirty.length === 0) queueMicrotask(flushDirty);
      dirty.push(stream);
    }
    stream.pending += frame.head + stream.idJson + frame.tail;
    if (stream.pending.length >= PENDING_FLUSH_CHARS) {
      writeChunk(stream, stream.pending);
      stream.pending = '';
    }
  }
}

setInterval(() => {
  // A pending batch keeps the connection alive anyway; a keepalive must not overtake it.
  for (const stream of all) if (stream.pending === '') writeChunk(stream, KEEPALIVE_FRAME);
}, KEEPALIVE_MS).unref();

/**
 * Reads the body, then lets go of it: the request lives as long as its response (a whole stream), and
 * a `'data'` listener left on it would keep every chunk of the body as long (0.5 KB of heap and as much
 * external memory per idle stream, seen in heap snapshots), which no server needs to keep.
 */
function readBody(req: IncomingMessage, done: (text: string) => void): void {
  const chunks: Buffer[] = [];
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
  };
  req.on('data', onData);
  req.once('end', () => {
    req.removeListener('data', onData);
    done(chunks.length === 1 ? (chunks[0] as Buffer).toString() : Buffer.concat(chunks).toString());
  });
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

type ListenBody = { id?: unknown; params?: { notifications?: Filter } };

/**
 * Hands `done` the request's JSON body: `parsed` where a framework has read it already (Fastify's JSON
 * parser, which the ceiling mounted in Fastify pays as ours on Fastify does), else the body read and
 * parsed here (a JSON-RPC parse error when it is not JSON).
 */
function jsonBody(req: IncomingMessage, res: ServerResponse, parsed: unknown, done: (body: unknown) => void): void {
  if (parsed !== undefined) {
    done(parsed);
    return;
  }
  readBody(req, (text) => {
    let body: unknown;
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      reply(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      return;
    }
    done(body);
  });
}

function listen(req: IncomingMessage, res: ServerResponse, principal: string, parsed: unknown): void {
  jsonBody(req, res, parsed, (json) => {
    const body = json as ListenBody;
    const id = body.id;
    const requested = body.params?.notifications;
    const uris = requested?.resourceSubscriptions ?? [];
    if (typeof requested !== 'object' || uris.length > MAX_FILTER_ENTRIES) {
      reply(res, 400, { jsonrpc: '2.0', id, error: { code: -32602, message: 'Invalid params' } });
      return;
    }
    const honored: Filter = {};
    if (requested.toolsListChanged === true) honored.toolsListChanged = true;
    const kept = new Set<string>();
    for (const uri of uris) if (canRead(principal, uri) && acceptsSubscription(uri)) kept.add(uri);
    if (kept.size > 0) honored.resourceSubscriptions = [...kept];
    const idJson = JSON.stringify(id);
    res.writeHead(200, SSE_HEADERS);
    res.write(ackFrame(idJson, honored));
    const stream: Stream = {
      res,
      socket: res.socket as Socket,
      idJson,
      uris: honored.resourceSubscriptions ?? [],
      tools: honored.toolsListChanged === true,
      pending: '',
    };
    all.push(stream);
    if (stream.tools) tools.push(stream);
    for (const uri of stream.uris) {
      const list = byUri.get(uri);
      if (list === undefined) byUri.set(uri, [stream]);
      else list.push(stream);
    }
    res.on('close', () => {
      stream.pending = ''; // a batch of this tick is dropped, as the library's is on cancel
      remove(all, stream);
      if (stream.tools) remove(tools, stream);
      for (const uri of stream.uris) {
        const list = byUri.get(uri);
        if (list === undefined) continue;
        remove(list, stream);
        if (list.length === 0) byUri.delete(uri);
      }
    });
  });
}

function publish(kind: 'tools' | 'resource', uri: string | undefined): void {
  if (kind === 'tools') write(tools, TOOLS_FRAME);
  else if (uri !== undefined) write(byUri.get(uri), resourceFrame(uri));
}

const control: ControlTarget = { publish, openStreams: () => all.length, prefill: () => {} };

/**
 * The ceiling's own routes, after the caller was authenticated; `parsed` is the JSON body where a
 * framework has read it already, `undefined` where the route reads it.
 */
function route(req: IncomingMessage, res: ServerResponse, principal: string, parsed?: unknown): void {
  if (req.method === 'POST' && req.url === '/mcp' && req.headers['mcp-method'] === 'subscriptions/listen') {
    listen(req, res, principal, parsed);
    return;
  }
  const write = /^\/api\/notes\/([^/]+)\/([^/]+)$/.exec(req.url ?? '');
  if (req.method === 'PUT' && write !== null) {
    jsonBody(req, res, parsed, () => {
      const uri = noteUri(write[1] as string, write[2] as string);
      publish('resource', uri);
      reply(res, 200, { uri });
    });
    return;
  }
  reply(res, 404, { error: 'not_found' });
}

/**
 * `ceiling.ts express`: the very same ceiling mounted in an Express app behind the host's bearer-auth
 * middleware, for the idle and open scenarios only. It does not compete: it shows, in the same run,
 * what serving a stream through Express costs by itself (Express gives every request and response a
 * hidden class of its own, and adds its own properties), so that the reader can tell the framework's
 * share of a figure from the library's.
 */
async function expressApp(): Promise<RequestListener> {
  // Loaded only here: the bare ceiling does not even load Express.
  const { default: express } = await import('express');
  const app = express();
  app.disable('x-powered-by');
  app.use((req, res, next) => {
    if (!serveControl(control, req, res)) next();
  });
  app.use((req, res, next) => {
    const caller = authenticate(req.headers.authorization, { conformance: false });
    if (caller === undefined) {
      res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unauthorized' });
      return;
    }
    (req as typeof req & { auth?: AuthInfo }).auth = toAuthInfo(caller);
    next();
  });
  const principal = (req: object): string => principalOf((req as { auth?: AuthInfo }).auth) ?? '';
  app.all('/mcp', (req, res) => route(req, res, principal(req)));
  app.put('/api/notes/:owner/:name', (req, res) => route(req, res, principal(req)));
  return app;
}

/**
 * `ceiling.ts fastify`: the very same ceiling as the route handlers of a Fastify 5 app behind the
 * host's bearer-auth hook (`bench/lib/fastify.ts`, as ours on Fastify has it), each handler hijacking
 * the reply and serving Node's response itself, as the Fastify plugin does; Fastify's JSON parser reads
 * the body. For idle, open, fan-out and tick: it does not compete, it shows in the same run what serving
 * a stream through Fastify costs by itself.
 */
async function fastifyServer(): Promise<Server> {
  // Loaded only here: the bare ceiling does not even load Fastify.
  const { fastifyServer: serve, principalOfRequest } = await import('../lib/fastify.ts');
  return serve(control, (app) => {
    const handler = (request: FastifyRequest, reply: FastifyReply): void => {
      reply.hijack();
      const body = request.body;
      // As the plugin does: Fastify keeps the request while the stream lives when its logger is on
      // (BENCH_FASTIFY_LOGGER), and the best a server can do is not keep the filter with it.
      request.body = undefined;
      route(request.raw, reply.raw, principalOfRequest(request), body);
    };
    app.post('/mcp', handler);
    app.put('/api/notes/:owner/:name', handler);
  });
}

const mode = process.argv[2];
const server =
  mode === 'express'
    ? createServer(await expressApp())
    : mode === 'fastify'
      ? await fastifyServer()
      : createServer((req, res) => {
          if (serveControl(control, req, res)) return;
          const caller = authenticate(req.headers.authorization, { conformance: false });
          if (caller === undefined) {
            reply(res, 401, { error: 'unauthorized' });
            return;
          }
          route(req, res, caller.principal);
        });
startServer(server, mode === 'express' || mode === 'fastify' ? `ceiling-${mode}` : 'ceiling');
