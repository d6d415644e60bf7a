/**
 * The Hono middleware through `app.request()` (Hono's own fetch, no sockets): who the caller is by
 * default, a body an earlier middleware parsed (the SDK's `parsedBody` convention), and what goes on to
 * `next()`.
 */
import { afterEach, describe, expect, test } from '@jest/globals';
import { Hono, type MiddlewareHandler } from 'hono';
import { SubscriptionHub } from 'mcp-subscriptions';
import { defaultPrincipal, mcpSubscriptions, type McpSubscriptionsHonoOptions } from 'mcp-subscriptions/hono';
import { thrown } from '../helpers/assert.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { listenBody, listenHeaders, SseParser, type SseEvent } from '../helpers/sse.ts';

const hubs: SubscriptionHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

/** An app whose `before` middleware sets context variables, then listen, then a handler that reports what it got. */
function build(before: MiddlewareHandler, options: Partial<McpSubscriptionsHonoOptions> = {}) {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  hubs.push(hub);
  const checked: string[] = [];
  const app = new Hono();
  app.post(
    '/mcp',
    before,
    mcpSubscriptions({
      hub,
      capabilities: { resourceSubscriptions: true },
      keepAliveMs: false,
      // Admits nothing: the listen is acknowledged and ends at once, so its body can be read whole.
      canRead: (_uri, { principal }) => {
        checked.push(principal);
        return false;
      },
      ...options,
    }),
    async (c) => c.json({ passed: true, parsedBody: c.get('parsedBody' as never) ?? null, raw: await c.req.text() }),
  );
  return { app, checked };
}

function events(text: string): SseEvent[] {
  const found: SseEvent[] = [];
  new SseParser((event) => found.push(event)).feed(text);
  return found;
}

const LISTEN = listenBody(1, { resourceSubscriptions: ['note://x/y'] });

describe('Hono middleware', () => {
  test("the caller is the SDK's AuthInfo at mcpAuthInfo or auth (extra.sub), else user", async () => {
    for (const [variable, value, principal] of [
      ['mcpAuthInfo', { token: 't', clientId: 'app', scopes: [], extra: { sub: 'alice' } }, 'alice'],
      ['auth', { token: 't', clientId: 'app', scopes: [], extra: { principal: 'bob' } }, 'bob'],
      ['user', { id: 'carol' }, 'carol'],
    ] as const) {
      const { app, checked } = build(async (c, next) => {
        c.set(variable as never, value as never);
        await next();
      });
      const res = await app.request('/mcp', { method: 'POST', headers: listenHeaders(), body: JSON.stringify(LISTEN) });
      expect(res.status).toBe(200);
      expect(events(await res.text()).map((event) => event.json.result?.resultType ?? event.json.method)).toStrictEqual(
        ['notifications/subscriptions/acknowledged', 'complete'],
      );
      expect(checked).toStrictEqual([principal]);
    }
  });

  test('a body an earlier middleware left at parsedBody is served as it is; the request body is not read', async () => {
    const { app, checked } = build(async (c, next) => {
      c.set('parsedBody' as never, LISTEN as never);
      c.set('user' as never, 'dana' as never);
      await next();
    });
    // The request's own body is not the listen: only the parsed one is.
    const res = await app.request('/mcp', { method: 'POST', headers: listenHeaders(), body: 'ignored' });
    expect(res.status).toBe(200);
    expect(checked).toStrictEqual(['dana']);
  });

  test('what is not a listen goes to next(): its parsed body at parsedBody, the request body unread', async () => {
    const { app } = build(async (_c, next) => next());
    const other = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };
    const res = await app.request('/mcp', {
      method: 'POST',
      headers: { ...listenHeaders(), 'mcp-method': 'tools/list' },
      body: JSON.stringify(other),
    });
    expect(await res.json()).toStrictEqual({ passed: true, parsedBody: other, raw: JSON.stringify(other) });
  });

  test('defaultPrincipal is exported, and mistakes throw at construction naming the field', () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    hubs.push(hub);
    expect(typeof defaultPrincipal).toBe('function');
    expect(thrown(() => mcpSubscriptions({ hub, capabilities: {}, principal: 'x' } as never))).toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_NOT_FUNCTION',
      message: expect.stringMatching(/`principal`/),
    });
    expect(thrown(() => mcpSubscriptions({ hub, capabilities: {}, maxBodyBytes: 0 }))).toMatchObject({
      message: expect.stringMatching(/`maxBodyBytes`/),
    });
  });
});
