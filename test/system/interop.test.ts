/**
 * Interop: the official `@modelcontextprotocol/client` as an independent peer of the Express sample,
 * spawned as a child process and reached over real HTTP. The client parses the listen stream itself
 * (ack, notifications, terminal result); this suite only drives it and watches what it reports.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Client,
  SdkHttpError,
  StreamableHTTPClientTransport,
  type McpSubscription,
} from '@modelcontextprotocol/client';
import {
  eventually,
  PROTOCOL_VERSION,
  startSample,
  stopAllSamples,
  TOKENS,
  type SampleApp,
} from '../helpers/sample-app.ts';
import { uid } from '../helpers/uid.ts';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

const clients: Client[] = [];

afterAll(stopAllSamples);

afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
});

/** A client connected as `token`'s principal, pinned to the listen revision. */
async function connect(app: SampleApp, token: string): Promise<Client> {
  const client = new Client(
    { name: 'mcp-subscriptions-interop', version: '0.0.0' },
    { versionNegotiation: { mode: { pin: PROTOCOL_VERSION } } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(app.url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** Every notification the client dispatches to its handlers, as `method uri?` lines, plus the raw messages. */
function record(client: Client) {
  const lines: string[] = [];
  const messages: any[] = [];
  const keep = (notification: any): void => {
    messages.push(notification);
    const uri = notification.params?.uri;
    lines.push(typeof uri === 'string' ? `${notification.method} ${uri}` : notification.method);
  };
  client.setNotificationHandler('notifications/tools/list_changed', keep);
  client.setNotificationHandler('notifications/prompts/list_changed', keep);
  client.setNotificationHandler('notifications/resources/list_changed', keep);
  client.setNotificationHandler('notifications/resources/updated', keep);
  return { lines, messages };
}

async function openStreams(app: SampleApp): Promise<number> {
  const res = await app.api(TOKENS.alice, 'GET', '/api/subscriptions/stats');
  expect(res.status).toBe(200); // res.text tells why
  return res.body.openStreams as number;
}

describe('interop: @modelcontextprotocol/client against the Express sample', () => {
  let app: SampleApp;
  // startSample gives up after 30 s by itself: the hook waits longer, so that its own message is the one reported.
  beforeAll(async () => {
    app = await startSample('express');
  }, 60_000);
  afterAll(async () => {
    await app?.stop();
  });

  it('listen() resolves with the honoured filter, leaving out what the caller may not read', async () => {
    const n = uid('honoured');
    const client = await connect(app, TOKENS.alice);
    const subscription = await client.listen({
      toolsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: [`note://alice/${n}`, `note://bob/${n}`, `note://shared/${n}`, `http://example.com/${n}`],
    });
    const { resourceSubscriptions, ...flags } = subscription.honoredFilter;
    expect(flags).toStrictEqual({ toolsListChanged: true, resourcesListChanged: true });
    expect([...(resourceSubscriptions ?? [])].sort()).toStrictEqual([`note://alice/${n}`, `note://shared/${n}`].sort());

    const bobClient = await connect(app, TOKENS.bob);
    const bobs = await bobClient.listen({ promptsListChanged: true, resourceSubscriptions: [`note://alice/${n}`] });
    expect(bobs.honoredFilter).toStrictEqual({ promptsListChanged: true });
  });

  it('list changes and resource updates from the REST API reach setNotificationHandler', async () => {
    const n = uid('events');
    const mine = `note://alice/${n}`;
    const sentinel = `note://shared/sentinel-${n}`;
    expect((await app.api(TOKENS.carol, 'PUT', `/api/notes/shared/sentinel-${n}`, { text: 'created' })).status).toBe(
      201,
    );
    const client = await connect(app, TOKENS.alice);
    const seen = record(client);
    const subscription = await client.listen({
      toolsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: [mine, sentinel, `note://bob/${n}`],
    });

    expect((await app.api(TOKENS.alice, 'PUT', `/api/notes/alice/${n}`, { text: 'one' })).status).toBe(201);
    expect((await app.api(TOKENS.bob, 'PUT', `/api/notes/bob/${n}`, { text: 'not for alice' })).status).toBe(201);
    expect((await app.api(TOKENS.bob, 'POST', '/api/catalog/tools')).status).toBe(202);
    expect((await app.api(TOKENS.bob, 'POST', '/api/catalog/prompts')).status).toBe(202);
    // The sentinel: an update alice does want, after everything above.
    expect((await app.api(TOKENS.carol, 'PUT', `/api/notes/shared/sentinel-${n}`, { text: 'tick' })).status).toBe(200);
    await eventually(() => seen.lines.includes(`notifications/resources/updated ${sentinel}`), 'the sentinel update');

    const beforeSentinel = seen.lines.slice(0, seen.lines.indexOf(`notifications/resources/updated ${sentinel}`));
    expect(beforeSentinel.sort()).toStrictEqual(
      [
        'notifications/resources/list_changed', // alice's create
        `notifications/resources/updated ${mine}`,
        'notifications/resources/list_changed', // bob's create: a list change reaches every list listener
        'notifications/tools/list_changed',
      ].sort(),
    );
    for (const message of seen.messages) {
      expect(String(message.params?._meta?.[SUBSCRIPTION_ID])).toMatch(/^listen:/);
    }
    await subscription.close();
  });

  it('close() ends the subscription locally and frees the stream on the server', async () => {
    await eventually(async () => (await openStreams(app)) === 0, 'no stream open before the test');
    const client = await connect(app, TOKENS.alice);
    const subscription: McpSubscription = await client.listen({ toolsListChanged: true });
    await eventually(async () => (await openStreams(app)) === 1, 'the stream open on the server');
    await subscription.close();
    expect(await subscription.closed).toBe('local');
    await eventually(async () => (await openStreams(app)) === 0, 'the stream freed on the server');
  });

  it('a refusal at capacity rejects listen(); a server shutdown (SIGTERM) ends a subscription as graceful', async () => {
    const small = await startSample('express', { MAX_SUBSCRIPTIONS: '1' });
    const client = await connect(small, TOKENS.alice);
    const subscription = await client.listen({ toolsListChanged: true, resourceSubscriptions: ['note://alice/bye'] });
    const other = await connect(small, TOKENS.bob);
    // The client surfaces a non-400 error response as an SdkHttpError carrying the status and the body.
    const refused = other.listen({ toolsListChanged: true });
    await expect(refused).rejects.toBeInstanceOf(SdkHttpError);
    const error = (await refused.catch((reason: unknown) => reason)) as SdkHttpError;
    expect(error.status).toBe(503);
    const body = JSON.parse(String(error.data.text));
    expect(body.error.code).toBe(-32603);
    expect(body.error.message).toBe('Subscription limit reached');
    const exitCode = small.stop('SIGTERM');
    expect(await subscription.closed).toBe('graceful');
    expect(await exitCode).toBe(0); // small.stderr() tells why
  });
});
