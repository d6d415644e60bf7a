/**
 * examples/next as a user gets it: installed from its own lockfile with the packed package over it,
 * built with `next build`, started with `next start`, and exercised over real HTTP: the app's own 401,
 * a listen answered by `mcp-subscriptions/fetch` from a route handler (the acknowledgement narrowed by
 * the read check, an event another route publishes), the rest of MCP by the SDK's fetch face, Express's
 * error for a bad filter, and a client hanging up freeing its stream (the route handler's
 * `request.signal`).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { bearer } from '../helpers/bearer.ts';
import { freePort } from '../helpers/free-port.ts';
import { installExample, packPackage, PACK_TIMEOUT_MS } from '../helpers/pack.ts';
import { eventually, mcpRequest, REPO_ROOT } from '../helpers/sample-app.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const DIR = path.join(REPO_ROOT, 'examples', 'next');
const NEXT = path.join(DIR, 'node_modules', 'next', 'dist', 'bin', 'next');
const ENV = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };
/** A first run installs next (and react) from the example's lockfile, then `next build` compiles it: minutes. */
const SETUP_TIMEOUT_MS = 600_000;

let server: ChildProcess | undefined;
let base = '';
const streams: SseStream[] = [];

beforeAll(async () => {
  const packed = packPackage();
  try {
    installExample(DIR, packed.tarball);
  } finally {
    packed.dispose();
  }
  try {
    execFileSync(process.execPath, [NEXT, 'build'], { cwd: DIR, env: ENV, stdio: 'pipe' });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`next build failed:\n${stdout?.toString()}\n${stderr?.toString()}`);
  }
  const port = await freePort();
  const child = spawn(process.execPath, [NEXT, 'start', '-p', String(port), '-H', '127.0.0.1'], {
    cwd: DIR,
    env: ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  server = child;
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`next start did not get ready:\n${output}`)), 30_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (/Ready in/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`next start exited ${String(code)}:\n${output}`)));
  });
  base = `http://127.0.0.1:${port}`;
}, SETUP_TIMEOUT_MS + PACK_TIMEOUT_MS);

afterAll(() => {
  for (const stream of streams.splice(0)) stream.close();
  if (server?.pid !== undefined) {
    try {
      process.kill(-server.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
});

async function stats(): Promise<{ openStreams: number; closed: Record<string, number> }> {
  const res = await fetch(`${base}/api/stats`, { headers: bearer('alice-token') });
  return (await res.json()) as { openStreams: number; closed: Record<string, number> };
}

describe('examples/next: a Next.js route handler with mcp-subscriptions/fetch, on next start', () => {
  it("answers a request without a token with the app's own 401", async () => {
    const res = await post(`${base}/mcp`, listenBody(1, { toolsListChanged: true }), listenHeaders());
    await res.end();
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
  });

  it('streams a listen: the read check narrows the acknowledgement, and an event published by another route arrives', async () => {
    const stream = await listen(
      `${base}/mcp`,
      'next-1',
      { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo', 'note://bob/secret'] },
      bearer('alice-token'),
    );
    streams.push(stream);
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    const ack = await stream.event(1);
    expect(ack.json.params.notifications).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/todo'],
    });
    const notified = await fetch(`${base}/api/notify`, { method: 'POST', headers: bearer('bob-token') });
    expect(notified.status).toBe(202);
    const event = await stream.event(2);
    expect(event.json.method).toBe('notifications/tools/list_changed');
    expect(event.json.params._meta['io.modelcontextprotocol/subscriptionId']).toBe('next-1');
  });

  it("serves the rest of MCP through the SDK's fetch face, and refuses a bad filter as Express does", async () => {
    const tools = await mcpRequest(`${base}/mcp`, 'alice-token', 'tools/list');
    expect(tools.status).toBe(200);
    expect(tools.message?.result?.tools).toStrictEqual([]);
    const bad = await post(
      `${base}/mcp`,
      listenBody(7, { resourceSubscriptions: ['relative/uri'] }),
      listenHeaders(bearer('alice-token')),
    );
    await bad.end();
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text)).toMatchObject({ id: 7, error: { code: -32602 } });
  });

  it('frees the stream of a client that hangs up (the request signal)', async () => {
    const before = await stats();
    const stream = await listen(`${base}/mcp`, 'next-gone', { toolsListChanged: true }, bearer('bob-token'));
    await stream.event(1);
    stream.close();
    await eventually(async () => {
      const now = await stats();
      return now.closed['client']! > before.closed['client']! && now.openStreams === before.openStreams;
    }, 'the hang-up counted and its stream freed');
  });
});
