/**
 * The ceiling: the least a server can do to serve the benchmark's listen streams on `node:http`.
 * It authenticates the caller (the host's bearer check), parses the body, runs the same read check
 * and subscribe hook per URI as the host app, writes the acknowledgement, keeps its responses in
 * plain arrays (one for tool-list listeners, one per URI), and per event writes the very bytes the
 * engine and the SDK write: no hub, no queue, no backpressure handling, one shared keepalive timer.
 * Its write route parses the body and publishes, nothing more. Usage: `node --expose-gc ... ceiling.ts`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { authenticate } from '../../sample-app/shared/auth.ts';
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

interface Stream {
  readonly res: ServerResponse;
  readonly idJson: string;
  readonly uris: readonly string[];
  readonly tools: boolean;
}

const all: Stream[] = [];
const tools: Stream[] = [];
const byUri = new Map<string, Stream[]>();

function remove(list: Stream[], stream: Stream): void {
  const index = list.indexOf(stream);
  if (index !== -1) list.splice(index, 1);
}

function write(list: readonly Stream[] | undefined, frame: SplitFrame): void {
  if (list === undefined) return;
  for (const stream of list) stream.res.write(frame.head + stream.idJson + frame.tail);
}

setInterval(() => {
  for (const stream of all) stream.res.write(KEEPALIVE_FRAME);
}, KEEPALIVE_MS).unref();

function readBody(req: IncomingMessage, done: (text: string) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => done(chunks.length === 1 ? (chunks[0] as Buffer).toString() : Buffer.concat(chunks).toString()));
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function listen(req: IncomingMessage, res: ServerResponse, principal: string): void {
  readBody(req, (text) => {
    let body: { id?: unknown; params?: { notifications?: Filter } };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      reply(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      return;
    }
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
      idJson,
      uris: honored.resourceSubscriptions ?? [],
      tools: honored.toolsListChanged === true,
    };
    all.push(stream);
    if (stream.tools) tools.push(stream);
    for (const uri of stream.uris) {
      const list = byUri.get(uri);
      if (list === undefined) byUri.set(uri, [stream]);
      else list.push(stream);
    }
    res.on('close', () => {
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

const server = createServer((req, res) => {
  if (serveControl(control, req, res)) return;
  const caller = authenticate(req.headers.authorization, { conformance: false });
  if (caller === undefined) {
    reply(res, 401, { error: 'unauthorized' });
    return;
  }
  if (req.method === 'POST' && req.url === '/mcp' && req.headers['mcp-method'] === 'subscriptions/listen') {
    listen(req, res, caller.principal);
    return;
  }
  const write = /^\/api\/notes\/([^/]+)\/([^/]+)$/.exec(req.url ?? '');
  if (req.method === 'PUT' && write !== null) {
    readBody(req, (text) => {
      JSON.parse(text);
      const uri = noteUri(write[1] as string, write[2] as string);
      publish('resource', uri);
      reply(res, 200, { uri });
    });
    return;
  }
  reply(res, 404, { error: 'not_found' });
});
startServer(server, 'ceiling');
