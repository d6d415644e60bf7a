/**
 * Anonymous callers on the Nest module (which serves through the same request handling as Express):
 * each anonymous listen has an identity of its own, so an anonymous `notifications/cancelled` cancels
 * nobody's stream, and anonymous callers together count as one principal for the per-principal limit.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { bearer, startNestApp, type NestTestApp } from '../helpers/nest-apps.ts';
import { listen, post, type SseStream } from '../helpers/sse.ts';

const apps: NestTestApp[] = [];
const streams: SseStream[] = [];

afterEach(async () => {
  for (const stream of streams.splice(0)) stream.close();
  for (const app of apps.splice(0)) await app.close();
});

/** An app whose callers pass the bearer guard but have no principal: anonymous to the module. */
async function anonymousApp(maxSubscriptionsPerPrincipal: number | false = false): Promise<NestTestApp> {
  const app = await startNestApp({
    module: { principal: () => undefined, hub: { maxSubscriptionsPerPrincipal } },
  });
  apps.push(app);
  return app;
}

async function open(app: NestTestApp, id: string | number): Promise<SseStream> {
  const stream = await listen(app.url, id, { toolsListChanged: true }, bearer('alice-token'));
  streams.push(stream);
  return stream;
}

describe('Nest: anonymous callers', () => {
  it("an anonymous cancel closes nobody's stream and goes on to the host's MCP route", async () => {
    const app = await anonymousApp();
    const first = await open(app, 'listen:1');
    const second = await open(app, 'listen:1');
    for (const stream of [first, second]) expect((await stream.event(1)).json?.method).toMatch(/acknowledged$/);
    const cancel = await post(
      app.url,
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'listen:1' } },
      { 'content-type': 'application/json', ...bearer('alice-token') },
    );
    await cancel.end();
    expect(cancel.status).not.toBe(202);
    expect(app.hub.stats().closed.cancelled).toBe(0);
    expect(app.hub.stats().openStreams).toBe(2);
  });

  it('anonymous callers together are one principal for maxSubscriptionsPerPrincipal', async () => {
    const app = await anonymousApp(2);
    const opened = [await open(app, 1), await open(app, 2), await open(app, 3)];
    expect(opened.map((stream) => stream.status)).toStrictEqual([200, 200, 503]);
    expect(app.hub.stats()).toMatchObject({ openStreams: 2, principals: 1, maxOpenPerPrincipal: 2 });
  });
});
