/**
 * The sample apps' contract (docs/sample-app.md), black-box: each sample runs as a child process
 * exactly as `npm start` would, and everything below goes over real HTTP on loopback. Tests that read
 * notifications read them with the package's own listen client (`mcp-subscriptions/client`); tests of
 * the wire itself (headers, the acknowledgement's and the result's exact messages, refusals, keepalive
 * comments, a reader that stops reading its socket) use a raw SSE reader. Nothing here knows how a
 * sample is built, so one suite serves every sample.
 *
 * Absence is never proven by waiting: each stream also listens to a "sentinel" shared note, and after
 * an action the test updates the sentinel and asserts what arrived before the sentinel's event.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { createServer, connect as netConnect } from 'node:net';
import { bearer } from '../helpers/bearer.ts';
import { freePort } from '../helpers/free-port.ts';
import { acceptsConnections, CAN_LIST_LISTENING_PORTS, listeningPorts } from '../helpers/listening.ts';
import {
  ACK,
  expectCancelAcross,
  listenClients,
  PROMPTS,
  RESOURCES,
  TASK,
  TOOLS,
  untilDelivered,
  UPDATED,
} from '../helpers/listen-clients.ts';
import { labelValues, scrape, seriesOf, totalOf, type Exposition } from '../helpers/prometheus.ts';
import { ownRedisSkipReason } from '../helpers/redis.ts';
import {
  eventually,
  postCancel,
  PROTOCOL_VERSION,
  putNote,
  REPO_ROOT,
  sampleCommand,
  sampleHost,
  selectedSampleKinds,
  startRedis,
  startSample,
  stopAllSamples,
  TOKENS,
  withOwnRedis,
  type HttpAnswer,
  type McpAnswer,
  type SampleApp,
} from '../helpers/sample-app.ts';
import { describeMessage, isUpdateOf, Sentinel, watcher } from '../helpers/sentinel.ts';
import { testUnless } from '../helpers/skip.ts';
import { listenBody, listenHeaders, post, TASKS_META, type SseStream } from '../helpers/sse.ts';
import { twoInstances, warm } from '../helpers/two-instances.ts';
import { uid } from '../helpers/uid.ts';

/** Every host, or those `SAMPLE_KINDS` names (CONTRIBUTING.md). */
const SAMPLES = selectedSampleKinds();

/**
 * The REDIS_URL rows start redis-servers of their own. Without redis-server on the machine they are
 * skipped, saying so, except in CI, where they must run (.ci/run installs it).
 */
const redisTest = testUnless(ownRedisSkipReason('the REDIS_URL rows'));

/** Which TCP ports a sample listens on can be read on Linux only (/proc); elsewhere those rows are skipped. */
const procTest = testUnless(
  CAN_LIST_LISTENING_PORTS ? undefined : 'listing a process’s listening ports needs Linux /proc',
);

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const TASKS = 'io.modelcontextprotocol/tasks';

const { alice, bob, carol } = TOKENS;

/** Streams opened by the current test; closed (the client hangs up) after it. */
const streams: SseStream[] = [];

afterAll(stopAllSamples);

/** POSTs a listen request and returns the response being read, whatever its status. */
async function listenRaw(
  app: SampleApp,
  token: string | undefined,
  id: string | number,
  notifications: Record<string, unknown>,
  meta: Record<string, unknown> = {},
): Promise<SseStream> {
  const stream = await post(app.url, listenBody(id, notifications, meta), listenHeaders(bearer(token)));
  streams.push(stream);
  return stream;
}

/** Opens a listen stream that must be accepted, and returns it with its acknowledgement. */
async function openStream(
  app: SampleApp,
  token: string | undefined,
  id: string | number,
  notifications: Record<string, unknown>,
  meta: Record<string, unknown> = {},
): Promise<{ stream: SseStream; ack: any; honored: Record<string, unknown> }> {
  const stream = await listenRaw(app, token, id, notifications, meta);
  if (stream.status !== 200) {
    await stream.end();
    throw new Error(`listen ${JSON.stringify(id)} was refused: HTTP ${stream.status} ${stream.text}`);
  }
  const ack = (await stream.event(1)).json;
  expect(ack?.method).toBe(ACK); // the first message of a stream is the acknowledgement
  return { stream, ack, honored: ack.params.notifications };
}

/**
 * Opens a listen stream with the listen client, for a test that reads its notifications, and ends it
 * after the test (`endSubscriptions`): a principal's is cancelled by the server (its
 * `notifications/cancelled`) rather than closed by the client, as the samples' graceful shutdown would
 * wait for the spare connection an aborted fetch leaves (test/helpers/listen-clients.ts). The buffer is
 * far above what any test sends between two reads: a contract test must see every notification, and
 * `Watch.next()` checks that none was dropped.
 */
const { subscribe, endAll: endSubscriptions } = listenClients({ maxBuffer: 10_000, end: 'cancel' });

/** A response that is not a stream: waits for its end and parses its JSON body. */
async function refusal(stream: SseStream): Promise<{ status: number; contentType: string; json: any }> {
  await stream.end();
  let json: any;
  try {
    json = JSON.parse(stream.text);
  } catch {
    throw new Error(`expected a JSON body, got HTTP ${stream.status} ${JSON.stringify(stream.text)}`);
  }
  return { status: stream.status, contentType: String(stream.headers['content-type']), json };
}

async function createTask(app: SampleApp, token: string): Promise<string> {
  const res = await app.api(token, 'POST', '/api/tasks');
  expect(res.status).toBe(201);
  expect(typeof res.body?.taskId).toBe('string');
  return res.body.taskId as string;
}

async function openStreamCount(app: SampleApp): Promise<number> {
  const res = await app.api(alice, 'GET', '/api/subscriptions/stats');
  expect(res.status).toBe(200);
  expect(typeof res.body?.openStreams).toBe('number'); // stats with a numeric openStreams
  return res.body.openStreams as number;
}

/** The library's instruments as the Prometheus exporter names them: dots to underscores, `_total` on counters. */
const metric = (name: string): string => `mcp_subscriptions_${name}`;

/** What /metrics says of the hub's gauges, under the names of `hub.stats()`; `following` by event kind. */
function gaugesOf(exposition: Exposition): Record<string, unknown> {
  const total = (name: string, labels: Record<string, string> = {}): number =>
    totalOf(exposition, metric(name), labels);
  const kinds = [
    'tools_list_changed',
    'prompts_list_changed',
    'resources_list_changed',
    'resource_updated',
    'task_status',
  ];
  return {
    openStreams: total('streams'),
    pendingStreams: total('streams_pending'),
    queued: total('queue_depth'),
    following: Object.fromEntries(
      kinds.map((kind) => [kind, total('streams_following', { mcp_subscriptions_event_kind: kind })]),
    ),
  };
}

/**
 * What /metrics says of the hub's counters, under the names of `hub.stats()`: each summed over its
 * attributes, `closed` and `refusals` by the attribute for each reason `stats` has.
 */
function countersOf(exposition: Exposition, stats: any): Record<string, unknown> {
  const total = (name: string, labels: Record<string, string> = {}): number =>
    totalOf(exposition, metric(name), labels);
  const byReason = (name: string, label: string, reasons: object): Record<string, number> =>
    Object.fromEntries(Object.keys(reasons).map((reason) => [reason, total(name, { [label]: reason })]));
  return {
    opened: total('listens_opened_total'),
    written: total('deliveries_total'),
    published: total('events_published_total'),
    coalesced: total('events_coalesced_total'),
    dropped: total('events_dropped_total'),
    closed: byReason('streams_closed_total', 'mcp_subscriptions_close_reason', stats.closed),
    refusals: byReason('listens_refused_total', 'error_type', stats.refusals),
  };
}

/**
 * The stats route and a scrape that saw the same state: the stats read before and after the scrape
 * agree. Counters only move with traffic, and the caller makes none meanwhile.
 */
async function quiescentScrape(app: SampleApp, metricsUrl: string): Promise<{ stats: any; exposition: Exposition }> {
  const seen = await eventually(async () => {
    const before = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
    const scraped = await scrape(metricsUrl);
    const after = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
    expect(scraped.status).toBe(200);
    return JSON.stringify(before) === JSON.stringify(after)
      ? { stats: after, exposition: scraped.exposition! }
      : undefined;
  }, 'a scrape between two equal reads of the stats route');
  return seen!;
}

function readText(res: McpAnswer): string {
  expect(res.message?.error).toBe(undefined); // resources/read did not fail
  return JSON.stringify(res.message?.result?.contents);
}

const sorted = (lines: string[]): string[] => [...lines].sort();

/** Opens a subscription that also follows `sentinel` (the client declares the Tasks extension for `taskIds`). */
const watch = watcher(subscribe);

for (const kind of SAMPLES) {
  describe(`sample app contract: ${kind}`, () => {
    // Spawning costs about a second each: start every configuration at once, await each where used.
    // The blocks await them in hooks given 60 s: startSample gives up after 30 s by itself, with the
    // sample's output in its message, which is the failure worth reading (not jest's hook timeout).
    const starting: Record<
      'main' | 'limited' | 'fair' | 'conformance' | 'shutdown' | 'metrics',
      Promise<SampleApp>
    > = {} as never;
    /** The METRICS_PORT of `starting.metrics`. */
    let metricsPort: Promise<number>;

    beforeAll(() => {
      starting.main = startSample(kind);
      starting.limited = startSample(kind, { MAX_SUBSCRIPTIONS: '2', KEEPALIVE_MS: '200' });
      starting.fair = startSample(kind, { MAX_SUBSCRIPTIONS_PER_PRINCIPAL: '2', STALL_TIMEOUT_MS: '500' });
      starting.conformance = startSample(kind, { MCP_CONFORMANCE: '1' });
      starting.shutdown = startSample(kind, { HOST: undefined });
      metricsPort = freePort();
      starting.metrics = metricsPort.then((port) => startSample(kind, { METRICS_PORT: String(port) }));
      // A failure is reported by the block that awaits it.
      for (const app of Object.values(starting)) app.catch(() => {});
    });

    afterEach(async () => {
      for (const stream of streams.splice(0)) stream.close();
      await endSubscriptions();
    });

    describe('default configuration', () => {
      let app: SampleApp;
      beforeAll(async () => {
        app = await starting.main;
      }, 60_000);
      afterAll(async () => {
        await app?.stop();
      });

      it('prints one "listening on http://HOST:PORT/mcp (host)" line with the real port and its host, and accepts connections', async () => {
        expect(app.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
        expect(app.host).toBe(sampleHost(kind));
        expect(new URL(app.url).port).not.toBe('0');
        expect(app.stdout().match(/listening on /g)?.length).toBe(1);
        const res = await app.api(alice, 'GET', '/api/subscriptions/stats');
        expect(res.status).toBe(200);
      });

      it('starts with its npm script, and SIGTERM to npm ends open streams gracefully and exits 0', async () => {
        const viaNpm = await startSample(kind, {}, { viaNpm: true });
        const stream = await post(
          viaNpm.url,
          listenBody('npm-1', { toolsListChanged: true }),
          listenHeaders({ authorization: `Bearer ${alice}` }),
        );
        await stream.event(1);
        const code = await viaNpm.stop('SIGTERM');
        await stream.end();
        expect(code).toBe(0);
        const last = stream.events.at(-1)?.json;
        expect(last?.result?.resultType).toStrictEqual('complete');
        expect(last?.id).toBe('npm-1');
      }, 60_000); // npm and the sample to start (startSample allows 30 s), then the contract's 5 s stop

      describe('identity', () => {
        const credentials: [string, Record<string, string>][] = [
          ['no Authorization header', {}],
          ['an unknown token', { authorization: 'Bearer mallory-token' }],
          ['an empty bearer token', { authorization: 'Bearer ' }],
          ['another scheme', { authorization: 'Basic YWxpY2U6YWxpY2U=' }],
        ];
        const mcpHeaders = (method: string): Record<string, string> => ({
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': PROTOCOL_VERSION,
          'mcp-method': method,
        });
        const discover = {
          jsonrpc: '2.0',
          id: 1,
          method: 'server/discover',
          params: {
            _meta: {
              'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
              'io.modelcontextprotocol/clientCapabilities': {},
            },
          },
        };
        interface Route {
          name: string;
          method: string;
          path: string;
          headers: Record<string, string>;
          body?: string;
        }
        // Every route family, each with a body that would otherwise succeed (or fail for another reason).
        const routes: Route[] = [
          {
            name: 'POST /mcp server/discover',
            method: 'POST',
            path: '/mcp',
            headers: mcpHeaders('server/discover'),
            body: JSON.stringify(discover),
          },
          {
            name: 'POST /mcp subscriptions/listen',
            method: 'POST',
            path: '/mcp',
            headers: listenHeaders(),
            body: JSON.stringify(listenBody('unauthorized', { toolsListChanged: true })),
          },
          {
            name: 'POST /mcp with a body that is not JSON',
            method: 'POST',
            path: '/mcp',
            headers: listenHeaders(),
            body: '{"jsonrpc":',
          },
          {
            name: 'PUT /api/notes/:owner/:name',
            method: 'PUT',
            path: '/api/notes/shared/unauthorized',
            headers: { 'content-type': 'application/json' },
            body: '{"text":"x"}',
          },
          {
            name: 'DELETE /api/notes/:owner/:name',
            method: 'DELETE',
            path: '/api/notes/shared/unauthorized',
            headers: {},
          },
          { name: 'POST /api/catalog/tools', method: 'POST', path: '/api/catalog/tools', headers: {} },
          { name: 'POST /api/catalog/prompts', method: 'POST', path: '/api/catalog/prompts', headers: {} },
          { name: 'POST /api/catalog/resources', method: 'POST', path: '/api/catalog/resources', headers: {} },
          { name: 'POST /api/tasks', method: 'POST', path: '/api/tasks', headers: {} },
          {
            name: 'POST /api/tasks/:taskId/status',
            method: 'POST',
            path: '/api/tasks/some-task/status',
            headers: { 'content-type': 'application/json' },
            body: '{"status":"completed"}',
          },
          { name: 'GET /api/subscriptions/stats', method: 'GET', path: '/api/subscriptions/stats', headers: {} },
        ];

        for (const route of routes) {
          it(`${route.name}: 401 with WWW-Authenticate: Bearer without a valid token`, async () => {
            for (const [what, auth] of credentials) {
              const res = await fetch(new URL(route.path, app.baseUrl), {
                method: route.method,
                headers: { ...route.headers, ...auth },
                ...(route.body === undefined ? {} : { body: route.body }),
              });
              await res.text();
              // Each expectation names the credential: a failure says which one.
              expect({ [what]: res.status }).toStrictEqual({ [what]: 401 });
              expect({ [what]: res.headers.get('www-authenticate') ?? '' }).toStrictEqual({
                [what]: expect.stringMatching(/^Bearer\b/i),
              });
              expect({ [what]: res.headers.get('content-type') ?? '' }).toStrictEqual({
                [what]: expect.not.stringMatching(/event-stream/),
              });
            }
          });
        }

        it('an unauthorized request changes nothing and emits nothing', async () => {
          const sentinel = await Sentinel.create(app);
          const name = uid('guarded');
          const created = await putNote(app, alice, `note://shared/${name}`, 'original');
          expect(created.status).toBe(201);
          const watcher = await watch(app, sentinel, alice, uid('guard'), {
            toolsListChanged: true,
            promptsListChanged: true,
            resourcesListChanged: true,
            resourceSubscriptions: [`note://shared/${name}`],
          });
          expect((await putNote(app, undefined, `note://shared/${name}`, 'changed')).status).toBe(401);
          expect((await putNote(app, 'mallory-token', `note://shared/${name}`, 'changed')).status).toBe(401);
          expect((await app.api(undefined, 'DELETE', `/api/notes/shared/${name}`)).status).toBe(401);
          for (const list of ['tools', 'prompts', 'resources']) {
            expect((await app.api(undefined, 'POST', `/api/catalog/${list}`)).status).toBe(401);
          }
          await sentinel.fire();
          expect(await watcher.next()).toStrictEqual([]);
          const read = await app.mcp(bob, 'resources/read', { uri: `note://shared/${name}` });
          expect(readText(read)).toMatch(/original/);
        });
      });

      describe('MCP endpoint', () => {
        it('server/discover advertises the list changes, resource subscriptions and the Tasks extension', async () => {
          const res = await app.mcp(alice, 'server/discover');
          expect(res.status).toBe(200);
          const result = res.message?.result;
          expect(result).toBeTruthy();
          expect(result.supportedVersions).toContain(PROTOCOL_VERSION);
          const { capabilities } = result;
          expect(capabilities.tools?.listChanged).toBe(true);
          expect(capabilities.prompts?.listChanged).toBe(true);
          expect(capabilities.resources?.listChanged).toBe(true);
          expect(capabilities.resources?.subscribe).toBe(true);
          expect(typeof capabilities.extensions?.[TASKS]).toBe('object');
          expect(capabilities.extensions[TASKS]).not.toBe(null);
        });

        it('listen honours exactly what server/discover advertises (one source of truth)', async () => {
          const { capabilities } = (await app.mcp(alice, 'server/discover')).message.result;
          const task = await createTask(app, alice);
          const uri = `note://shared/${uid('caps')}`;
          const { honored } = await openStream(
            app,
            alice,
            uid('caps'),
            {
              toolsListChanged: true,
              promptsListChanged: true,
              resourcesListChanged: true,
              resourceSubscriptions: [uri],
              taskIds: [task],
            },
            TASKS_META,
          );
          const advertised: Record<string, unknown> = {};
          if (capabilities.tools?.listChanged === true) advertised.toolsListChanged = true;
          if (capabilities.prompts?.listChanged === true) advertised.promptsListChanged = true;
          if (capabilities.resources?.listChanged === true) advertised.resourcesListChanged = true;
          if (capabilities.resources?.subscribe === true) advertised.resourceSubscriptions = [uri];
          if (capabilities.extensions?.[TASKS] !== undefined) advertised.taskIds = [task];
          expect(honored).toStrictEqual(advertised);
        });

        it('listen and resources/read agree on every existing note, for every principal (one read check)', async () => {
          const name = uid('agree');
          const uris: string[] = [];
          for (const [owner, token] of [
            ['alice', alice],
            ['bob', bob],
            ['carol', carol],
            ['shared', bob],
          ] as const) {
            expect((await putNote(app, token, `note://${owner}/${name}`, `${owner} text`)).status).toBe(201);
            uris.push(`note://${owner}/${name}`);
          }
          for (const [principal, token] of Object.entries({ alice, bob, carol })) {
            const { honored } = await openStream(app, token, uid('agree'), { resourceSubscriptions: uris });
            const acknowledged = new Set(honored.resourceSubscriptions as string[]);
            for (const uri of uris) {
              const read = await app.mcp(token, 'resources/read', { uri });
              const readable = read.message?.result !== undefined;
              const which = `${principal}, ${uri}: ack vs resources/read`; // names the case when it fails
              expect({ [which]: acknowledged.has(uri) }).toStrictEqual({ [which]: readable });
            }
            // the principal reads their own note and the shared one
            expect({ [principal]: acknowledged.size }).toStrictEqual({ [principal]: 2 });
          }
        });

        it('serves the rest of MCP: tools/list, prompts/list, resources/list; resources/list shows no foreign note', async () => {
          const name = uid('listed');
          for (const [owner, token] of [
            ['alice', alice],
            ['bob', bob],
            ['shared', carol],
          ] as const) {
            expect((await putNote(app, token, `note://${owner}/${name}`, 'listed')).status).toBe(201);
          }
          for (const method of ['tools/list', 'prompts/list', 'resources/list']) {
            const res = await app.mcp(alice, method);
            expect({ [method]: res.status }).toStrictEqual({ [method]: 200 });
            expect(res.message?.result).toBeTruthy();
          }
          const listed = (await app.mcp(alice, 'resources/list')).message.result.resources as { uri: string }[];
          const uris = listed.map((resource) => resource.uri);
          expect(uris).toContain(`note://alice/${name}`);
          // alice sees none of bob's notes
          expect(uris.filter((uri) => uri.startsWith('note://bob/'))).toStrictEqual([]);
        });

        it('GET and DELETE on /mcp: 405 with Allow: POST', async () => {
          for (const method of ['GET', 'DELETE']) {
            const res = await fetch(app.url, { method, headers: bearer(alice) });
            await res.text();
            expect({ [method]: res.status }).toStrictEqual({ [method]: 405 });
            expect({ [method]: res.headers.get('allow') ?? '' }).toStrictEqual({
              [method]: expect.stringMatching(/\bPOST\b/),
            });
          }
        });

        it('without MCP_CONFORMANCE the conformance fixture tools are not registered', async () => {
          const res = await app.mcp(alice, 'tools/list');
          expect(Array.isArray(res.message?.result?.tools)).toBeTruthy();
          const names = (res.message.result.tools as { name: string }[]).map((tool) => tool.name);
          expect(names).not.toContain('test_trigger_tool_change');
          expect(names).not.toContain('test_trigger_prompt_change');
        });

        it('resources/read enforces the note rule: own notes and shared notes only', async () => {
          const name = uid('read');
          expect((await putNote(app, alice, `note://alice/${name}`, `alice wrote ${name}`)).status).toBe(201);
          expect((await putNote(app, bob, `note://bob/${name}`, `bob wrote ${name}`)).status).toBe(201);
          expect((await putNote(app, carol, `note://carol/${name}`, `carol wrote ${name}`)).status).toBe(201);
          expect((await putNote(app, bob, `note://shared/${name}`, `shared by bob ${name}`)).status).toBe(201);
          const owners = { alice, bob, carol } as const;
          for (const [reader, token] of Object.entries(owners)) {
            for (const owner of ['alice', 'bob', 'carol', 'shared']) {
              const res = await app.mcp(token, 'resources/read', { uri: `note://${owner}/${name}` });
              if (owner === reader || owner === 'shared') {
                const which = `${reader} reads note://${owner}`; // names the case when it fails
                expect({ [which]: readText(res) }).toStrictEqual({ [which]: expect.stringContaining(name) });
              } else {
                expect(res.message?.error).toBeTruthy(); // the reader must not read another's note
                expect(res.message.result).toBe(undefined);
                expect(res.text).not.toContain('wrote'); // the refusal does not leak the note
              }
            }
          }
        });
      });

      it("resources/read does not hand out another principal's note under a disguised URI", async () => {
        const name = uid('disguise');
        expect((await putNote(app, bob, `note://bob/${name}`, `bob wrote ${name}`)).status).toBe(201);
        expect((await putNote(app, alice, `note://alice/${name}`, `alice wrote ${name}`)).status).toBe(201);
        const disguises = [
          `note://alice/../bob/${name}`,
          `note://shared/../bob/${name}`,
          `note://alice/%2E%2E/bob/${name}`,
          `note://alice/..%2Fbob%2F${name}`,
          `NOTE://bob/${name}`,
          `note://BOB/${name}`,
          `note://alice@bob/${name}`,
          `note://bob/${name}?as=alice`,
          `note://bob/${name}#alice`,
          `note://bob/${name}/`,
          `note://bob//${name}`,
        ];
        for (const uri of disguises) {
          const res = await app.mcp(alice, 'resources/read', { uri });
          expect({ [uri]: res.text }).toStrictEqual({ [uri]: expect.not.stringContaining('bob wrote') });
        }
      });

      describe('listen acknowledgement', () => {
        it('holds exactly the readable note:// URIs, duplicates collapsed, refusals silently absent', async () => {
          const n = uid('ack');
          const mine = `note://alice/${n}`;
          const shared = `note://shared/${n}`;
          const { stream, ack, honored } = await openStream(app, alice, `ack-${n}`, {
            resourceSubscriptions: [mine, `note://bob/${n}`, shared, `http://example.com/${n}`, mine, shared],
          });
          expect(stream.status).toBe(200);
          expect(String(stream.headers['content-type'])).toMatch(/^text\/event-stream/);
          expect(String(stream.headers['cache-control'])).toMatch(/no-cache/);
          expect(String(stream.headers['cache-control'])).toMatch(/no-transform/);
          expect(stream.headers['x-accel-buffering']).toBe('no');
          expect(stream.headers['mcp-session-id']).toBe(undefined);
          expect(ack.params._meta[SUBSCRIPTION_ID]).toBe(`ack-${n}`);
          expect(Object.keys(honored)).toStrictEqual(['resourceSubscriptions']);
          expect(sorted(honored.resourceSubscriptions as string[])).toStrictEqual(sorted([mine, shared]));
          expect(stream.text).not.toContain('note://bob/');
          expect(stream.text).not.toContain('example.com');
        });

        it('never echoes a false flag or a field it does not know', async () => {
          const { honored } = await openStream(app, alice, uid('flags'), {
            toolsListChanged: false,
            promptsListChanged: true,
            resourcesListChanged: false,
            someFutureField: true,
            resourceSubscriptions: [],
          });
          expect(honored).toStrictEqual({ promptsListChanged: true });
        });

        it('a refused URI looks exactly like one never asked for, whether or not the note exists', async () => {
          const n = uid('leak');
          expect((await putNote(app, bob, `note://bob/exists-${n}`, 'secret')).status).toBe(201);
          const shared = `note://shared/${n}`;
          const refused = [`note://bob/exists-${n}`, `note://bob/missing-${n}`, `urn:example:${n}`, `file:///${n}`];
          const asked = await openStream(app, alice, 'same-id', { resourceSubscriptions: [...refused, shared] });
          const plain = await openStream(app, alice, 'same-id', { resourceSubscriptions: [shared] });
          expect(asked.ack).toStrictEqual(plain.ack);
          expect(asked.honored).toStrictEqual({ resourceSubscriptions: [shared] });
        });

        it('accepts the URI of a note that does not exist yet but would be readable', async () => {
          const n = uid('future');
          for (const [token, owner] of [
            [alice, 'alice'],
            [bob, 'bob'],
            [carol, 'carol'],
            [carol, 'shared'],
          ] as const) {
            const uri = `note://${owner}/${n}`;
            const { honored } = await openStream(app, token, uid('future'), { resourceSubscriptions: [uri] });
            expect(honored).toStrictEqual({ resourceSubscriptions: [uri] });
          }
        });

        it('a listen whose every URI is refused is acknowledged empty, then completed at once', async () => {
          const id = uid('nothing');
          const { stream, honored } = await openStream(app, bob, id, {
            resourceSubscriptions: [`note://alice/${id}`, `note://carol/${id}`],
          });
          expect(honored).toStrictEqual({});
          await stream.end();
          expect(stream.events.length).toBe(2);
          const result = stream.events[1]!.json;
          expect(result.id).toBe(id);
          expect(result.result?.resultType).toBe('complete');
          expect(result.result._meta[SUBSCRIPTION_ID]).toBe(id);
        });
      });

      describe('events from the host REST API', () => {
        it('create → list change + update; update → update only; delete → both; to exactly the right streams', async () => {
          const sentinel = await Sentinel.create(app);
          const name = uid('note');
          const uri = `note://alice/${name}`;
          const path = `/api/notes/alice/${name}`;
          const both = await watch(app, sentinel, alice, 'both', {
            resourcesListChanged: true,
            resourceSubscriptions: [uri],
          });
          const uriOnly = await watch(app, sentinel, alice, 'uri-only', { resourceSubscriptions: [uri] });
          const listOnly = await watch(app, sentinel, bob, 'list-only', { resourcesListChanged: true });
          const elsewhere = await watch(app, sentinel, alice, 'elsewhere', {
            toolsListChanged: true,
            promptsListChanged: true,
            resourceSubscriptions: [`note://alice/${uid('other')}`],
          });
          const intruder = await watch(app, sentinel, bob, 'intruder', { resourceSubscriptions: [uri] });
          expect(intruder.subscription.honored).toStrictEqual({ resourceSubscriptions: [sentinel.uri] });

          const phases: [string, () => Promise<HttpAnswer>, number, string[], string[], string[]][] = [
            [
              'create',
              () => app.api(alice, 'PUT', path, { text: 'one' }),
              201,
              [RESOURCES, `${UPDATED} ${uri}`],
              [`${UPDATED} ${uri}`],
              [RESOURCES],
            ],
            [
              'update',
              () => app.api(alice, 'PUT', path, { text: 'two' }),
              200,
              [`${UPDATED} ${uri}`],
              [`${UPDATED} ${uri}`],
              [],
            ],
            [
              'delete',
              () => app.api(alice, 'DELETE', path),
              204,
              [RESOURCES, `${UPDATED} ${uri}`],
              [`${UPDATED} ${uri}`],
              [RESOURCES],
            ],
          ];
          for (const [phase, act, status, toBoth, toUri, toList] of phases) {
            const res = await act();
            // Each expectation names the phase: a failure says which one.
            expect({ [phase]: res.status }).toStrictEqual({ [phase]: status });
            await sentinel.fire();
            expect({ [phase]: await both.next() }).toStrictEqual({ [phase]: sorted(toBoth) }); // list + URI subscriber
            expect({ [phase]: await uriOnly.next() }).toStrictEqual({ [phase]: sorted(toUri) }); // URI subscriber
            expect({ [phase]: await listOnly.next() }).toStrictEqual({ [phase]: sorted(toList) }); // list subscriber
            expect({ [phase]: await elsewhere.next() }).toStrictEqual({ [phase]: [] }); // a stream that wants neither
            expect({ [phase]: await intruder.next() }).toStrictEqual({ [phase]: [] }); // a stream refused the URI
          }
        });

        it('anyone may create, update and delete a shared note; its subscribers hear of it', async () => {
          const sentinel = await Sentinel.create(app);
          const name = uid('shared');
          const uri = `note://shared/${name}`;
          const path = `/api/notes/shared/${name}`;
          const watcher = await watch(app, sentinel, carol, uid('shared'), { resourceSubscriptions: [uri] });
          expect((await app.api(bob, 'PUT', path, { text: '' })).status).toBe(201); // an empty text is a string
          expect((await app.api(alice, 'PUT', path, { text: 'by alice' })).status).toBe(200);
          expect((await app.api(carol, 'DELETE', path)).status).toBe(204);
          await sentinel.fire();
          expect(await watcher.next()).toStrictEqual([`${UPDATED} ${uri}`, `${UPDATED} ${uri}`, `${UPDATED} ${uri}`]);
        });

        it('a name of 128 characters, the longest allowed, is created, updated, read and heard of; 129 and more are 400', async () => {
          const sentinel = await Sentinel.create(app);
          const name = `${uid('long')}-`.padEnd(128, 'n');
          const uri = `note://alice/${name}`;
          const path = `/api/notes/alice/${name}`;
          const follower = await watch(app, sentinel, alice, uid('long'), { resourceSubscriptions: [uri] });
          expect(follower.subscription.honored.resourceSubscriptions).toContain(uri);
          expect((await app.api(alice, 'PUT', path, { text: 'one' })).status).toBe(201);
          expect((await app.api(alice, 'PUT', path, { text: 'two' })).status).toBe(200);
          for (const length of [129, 1000]) {
            // The notes service refuses it, naming the field, on every host: no router answers first (414).
            const refused = await app.api(alice, 'PUT', `/api/notes/alice/${name.padEnd(length, 'n')}`, { text: 'x' });
            expect({ [length]: refused.status }).toStrictEqual({ [length]: 400 });
            expect(refused.text).toMatch(/name/); // names the field
          }
          await sentinel.fire();
          expect(await follower.next()).toStrictEqual([`${UPDATED} ${uri}`, `${UPDATED} ${uri}`]);
          expect(readText(await app.mcp(alice, 'resources/read', { uri }))).toMatch(/two/);
        });

        it('the catalog routes reach exactly the streams listening for that list', async () => {
          const sentinel = await Sentinel.create(app);
          const watchers = {
            tools: await watch(app, sentinel, alice, uid('tools'), { toolsListChanged: true }),
            prompts: await watch(app, sentinel, bob, uid('prompts'), { promptsListChanged: true }),
            resources: await watch(app, sentinel, carol, uid('resources'), { resourcesListChanged: true }),
            none: await watch(app, sentinel, alice, uid('none'), {}),
          };
          const methods = { tools: TOOLS, prompts: PROMPTS, resources: RESOURCES } as const;
          for (const list of ['tools', 'prompts', 'resources'] as const) {
            const res = await app.api(bob, 'POST', `/api/catalog/${list}`);
            expect({ [list]: res.status }).toStrictEqual({ [list]: 202 });
            await sentinel.fire();
            for (const [name, watcher] of Object.entries(watchers)) {
              const route = `${list} → ${name}`; // names the case when the expectation fails
              expect({ [route]: await watcher.next() }).toStrictEqual({
                [route]: name === list ? [methods[list]] : [],
              });
            }
          }
        });

        it('every message carries the listen id as its subscriptionId: string and number ids, 0, "" and escapes', async () => {
          // The raw reader: that each message is one `data:` line is a fact of the bytes.
          const sentinel = await Sentinel.create(app);
          const ids = ['listen-1', 0, 42, '', -1.5, 'quote" back\\ newline\n sep\u2028 emoji 😀'];
          const opened: SseStream[] = [];
          for (const id of ids) {
            const filter = { toolsListChanged: true, resourceSubscriptions: [sentinel.uri] };
            opened.push((await openStream(app, alice, id, filter)).stream);
          }
          expect((await app.api(alice, 'POST', '/api/catalog/tools')).status).toBe(202);
          await sentinel.fire();
          for (const [i, stream] of opened.entries()) {
            await stream.until(() => stream.events.length >= 3, 'the tools change and the sentinel');
            expect(stream.events.slice(1).map((event) => describeMessage(event.json))).toStrictEqual([
              TOOLS,
              `${UPDATED} ${sentinel.uri}`,
            ]);
            for (const event of stream.events) {
              expect(event.data).not.toContain('\n'); // one data line per message
              expect(event.json.jsonrpc).toBe('2.0');
              expect(event.json.params._meta[SUBSCRIPTION_ID]).toBe(ids[i]);
            }
          }
        });

        it('notifications/cancelled from the listener ends its stream with 202; from another principal it does not', async () => {
          const sentinel = await Sentinel.create(app);
          const id = uid('cancel');
          const watcher = await watch(app, sentinel, alice, id, { toolsListChanged: true });
          const cancel = (token: string) => postCancel(app, token, id);
          await (await cancel(bob)).text();
          await sentinel.fire();
          expect(await watcher.next()).toStrictEqual([]); // bob cannot cancel alice's stream
          const res = await cancel(alice);
          expect(res.status).toBe(202);
          expect(await res.text()).toBe('');
          expect(await watcher.subscription.ended).toBe('lost'); // a cancelled stream gets no result
        });
      });

      describe('Tasks extension', () => {
        it('POST /api/tasks creates a task owned by the caller: 201 {taskId}', async () => {
          const first = await createTask(app, alice);
          const second = await createTask(app, alice);
          expect(first).not.toBe('');
          expect(first).not.toBe(second);
        });

        it('a listen with taskIds and the extension declared receives each status change with the full state', async () => {
          const task = await createTask(app, alice);
          const subscription = await subscribe(app, alice, 'task-listen', { taskIds: [task] });
          expect(subscription.honored).toStrictEqual({ taskIds: [task] });
          const items = subscription[Symbol.asyncIterator]();
          for (const status of ['input_required', 'working', 'completed']) {
            const res = await app.api(alice, 'POST', `/api/tasks/${task}/status`, { status });
            expect(res.status).toBe(200);
            const item = (await items.next()).value!;
            expect(item.type === 'notification' && item.method).toBe(TASK); // the very next item
            const { _meta: meta, ...state } = (item as { params: Record<string, any> }).params;
            expect(meta[SUBSCRIPTION_ID]).toBe('task-listen');
            expect(state.taskId).toBe(task);
            expect(state.status).toBe(status);
            expect(Date.parse(state.createdAt)).not.toBeNaN(); // createdAt is a date
            expect(Date.parse(state.lastUpdatedAt)).not.toBeNaN(); // lastUpdatedAt is a date
            expect(Date.parse(state.lastUpdatedAt)).toBeGreaterThanOrEqual(Date.parse(state.createdAt));
            expect(state.ttlMs === null || typeof state.ttlMs === 'number').toBeTruthy(); // ttlMs: null or a number
          }
        });

        it('taskIds without declaring the extension: JSON-RPC -32021, HTTP 400', async () => {
          const task = await createTask(app, alice);
          const { status, contentType, json } = await refusal(
            await listenRaw(app, alice, 'undeclared', { taskIds: [task] }),
          );
          expect(status).toBe(400);
          expect(contentType).toMatch(/^application\/json/);
          expect(json.id).toBe('undeclared');
          expect(json.error?.code).toBe(-32021);
          expect(json.error.data).toStrictEqual({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
        });

        it("another principal's task id and an unknown one are dropped, and their changes never arrive", async () => {
          const sentinel = await Sentinel.create(app);
          const mine = await createTask(app, alice);
          const theirs = await createTask(app, bob);
          const aliceWatch = await watch(app, sentinel, alice, uid('tasks'), {
            taskIds: [mine, theirs, uid('no-such-task'), mine],
          });
          expect(aliceWatch.subscription.honored.taskIds).toStrictEqual([mine]);
          const bobWatch = await watch(app, sentinel, bob, uid('tasks'), { taskIds: [theirs, mine] });
          expect(bobWatch.subscription.honored.taskIds).toStrictEqual([theirs]);
          expect((await app.api(bob, 'POST', `/api/tasks/${theirs}/status`, { status: 'failed' })).status).toBe(200);
          expect((await app.api(alice, 'POST', `/api/tasks/${mine}/status`, { status: 'cancelled' })).status).toBe(200);
          await sentinel.fire();
          expect(await aliceWatch.next()).toStrictEqual([`${TASK} ${mine} cancelled`]);
          expect(await bobWatch.next()).toStrictEqual([`${TASK} ${theirs} failed`]);
        });
      });

      describe('REST errors', () => {
        /** Streams of alice and bob that want everything the failing requests could touch. */
        async function watchers(name: string, aliceTask: string, bobTask: string) {
          const sentinel = await Sentinel.create(app);
          const everything = (owner: string, task: string) => ({
            toolsListChanged: true,
            promptsListChanged: true,
            resourcesListChanged: true,
            resourceSubscriptions: [`note://${owner}/${name}`, `note://shared/${name}`],
            taskIds: [task],
          });
          return {
            sentinel,
            alice: await watch(app, sentinel, alice, uid('errors'), everything('alice', aliceTask)),
            bob: await watch(app, sentinel, bob, uid('errors'), everything('bob', bobTask)),
          };
        }

        it('a body that fails validation gets 400 naming the field; nothing changes, nothing is emitted', async () => {
          const name = uid('valid');
          expect((await putNote(app, alice, `note://alice/${name}`, 'original')).status).toBe(201);
          const task = await createTask(app, alice);
          const w = await watchers(name, task, await createTask(app, bob));
          const invalidNotes: unknown[] = [{}, { text: 42 }, { text: null }, { text: ['a'] }, { body: 'x' }];
          for (const body of invalidNotes) {
            const res = await app.api(alice, 'PUT', `/api/notes/alice/${name}`, body);
            const sent = JSON.stringify(body); // names the case when the expectation fails
            expect({ [sent]: res.status }).toStrictEqual({ [sent]: 400 });
            expect(res.body).toBeDefined(); // a JSON error
            expect(res.text).toMatch(/text/); // names the field
          }
          const created = await app.api(alice, 'PUT', `/api/notes/alice/${uid('never')}`, {});
          expect(created.status).toBe(400);
          const malformed = await app.api(alice, 'PUT', `/api/notes/alice/${name}`, '{"text":');
          expect(malformed.status).toBe(400);
          const invalidStatuses: unknown[] = [{}, { status: 'done' }, { status: 42 }, { status: 'COMPLETED' }];
          for (const body of invalidStatuses) {
            const res = await app.api(alice, 'POST', `/api/tasks/${task}/status`, body);
            const sent = JSON.stringify(body); // names the case when the expectation fails
            expect({ [sent]: res.status }).toStrictEqual({ [sent]: 400 });
            expect(res.body).toBeDefined(); // a JSON error
            expect(res.text).toMatch(/status/); // names the field
          }
          await w.sentinel.fire();
          expect(await w.alice.next()).toStrictEqual([]);
          expect(await w.bob.next()).toStrictEqual([]);
          const read = await app.mcp(alice, 'resources/read', { uri: `note://alice/${name}` });
          expect(readText(read)).toMatch(/original/);
        });

        it("another principal's note or task gets 403; nothing changes, nothing is emitted", async () => {
          const name = uid('foreign');
          expect((await putNote(app, bob, `note://bob/${name}`, 'original')).status).toBe(201);
          const bobTask = await createTask(app, bob);
          const aliceTask = await createTask(app, alice);
          const w = await watchers(name, aliceTask, bobTask);
          const attempts: [string, string, unknown?][] = [
            ['PUT', `/api/notes/bob/${name}`, { text: 'changed' }],
            ['DELETE', `/api/notes/bob/${name}`],
            ['PUT', `/api/notes/bob/${uid('new')}`, { text: 'planted' }],
            ['PUT', `/api/notes/carol/${uid('new')}`, { text: 'planted' }],
            ['POST', `/api/tasks/${bobTask}/status`, { status: 'completed' }],
          ];
          for (const [method, path, body] of attempts) {
            const res = await app.api(alice, method, path, body);
            const attempt = `${method} ${path}`; // names the case when the expectation fails
            expect({ [attempt]: res.status }).toStrictEqual({ [attempt]: 403 });
          }
          await w.sentinel.fire();
          expect(await w.alice.next()).toStrictEqual([]);
          expect(await w.bob.next()).toStrictEqual([]);
          const read = await app.mcp(bob, 'resources/read', { uri: `note://bob/${name}` });
          expect(readText(read)).toMatch(/original/);
        });

        it('an unknown task gets 404; nothing is emitted', async () => {
          const aliceTask = await createTask(app, alice);
          const w = await watchers(uid('unknown'), aliceTask, await createTask(app, bob));
          const res = await app.api(alice, 'POST', `/api/tasks/${uid('no-such-task')}/status`, { status: 'completed' });
          expect(res.status).toBe(404);
          await w.sentinel.fire();
          expect(await w.alice.next()).toStrictEqual([]);
          expect(await w.bob.next()).toStrictEqual([]);
        });
      });

      it('GET /api/subscriptions/stats counts open streams and goes back to 0 once clients hang up', async () => {
        await eventually(async () => (await openStreamCount(app)) === 0, 'no stream open before the test', {
          timeoutMs: 5000,
        });
        const first = await openStream(app, alice, uid('stats'), { toolsListChanged: true });
        const second = await openStream(app, bob, uid('stats'), { resourceSubscriptions: ['note://bob/stats'] });
        await eventually(async () => (await openStreamCount(app)) === 2, 'two open streams');
        first.stream.close();
        await eventually(async () => (await openStreamCount(app)) === 1, 'one open stream after a hang-up');
        second.stream.close();
        await eventually(async () => (await openStreamCount(app)) === 0, 'no open stream after both hung up');
      });

      it('GET /api/subscriptions/stats shows counts only: no principal name, URI or task id', async () => {
        const task = await createTask(app, carol);
        const n = uid('secret');
        const first = await openStream(app, alice, uid('stats'), { resourceSubscriptions: [`note://alice/${n}`] });
        const second = await openStream(app, bob, uid('stats'), { toolsListChanged: true });
        const third = await openStream(app, carol, uid('stats'), { taskIds: [task] }, TASKS_META);
        await eventually(async () => (await openStreamCount(app)) >= 3, 'three open streams');
        const stats = await app.api(alice, 'GET', '/api/subscriptions/stats');
        expect(stats.status).toBe(200);
        const text = JSON.stringify(stats.body);
        for (const secret of ['alice', 'bob', 'carol', 'note://', n, task]) {
          expect({ secret, leaked: text.includes(secret) }).toStrictEqual({ secret, leaked: false });
        }
        for (const { stream } of [first, second, third]) stream.close();
      });

      it('GET /api/subscriptions/stats has no `bus` with the in-memory hub (REDIS_URL, REDIS_CLUSTER and DATABASE_URL unset)', async () => {
        const stats = await app.api(alice, 'GET', '/api/subscriptions/stats');
        expect(stats.status).toBe(200);
        expect(typeof stats.body?.openStreams).toBe('number');
        expect(stats.body).not.toHaveProperty('bus');
      });

      it('serves no metrics without METRICS_PORT: the port it would have used is refused, and /metrics on PORT is not open', async () => {
        const port = await freePort();
        expect(await acceptsConnections(port)).toBe(false);
        const metrics = await fetch(new URL('/metrics', app.baseUrl));
        await metrics.arrayBuffer();
        expect([401, 404]).toContain(metrics.status); // behind the app's auth, or no such route
      });

      procTest('listens on PORT only without METRICS_PORT', () => {
        expect(listeningPorts(app.child.pid!)).toStrictEqual([Number(new URL(app.baseUrl).port)]);
      });

      describe('listen request errors (spec §6)', () => {
        async function refused(body: unknown, headers: Record<string, string> = listenHeaders(bearer(alice))) {
          const stream = await post(app.url, body, headers);
          streams.push(stream);
          const answer = await refusal(stream);
          expect(answer.contentType).toMatch(/^application\/json/);
          expect(answer.json.jsonrpc).toBe('2.0');
          expect(answer.json.result).toBe(undefined);
          return answer;
        }

        it('a body that is not JSON: -32700, HTTP 400', async () => {
          const { status, json } = await refused('{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen",');
          expect(status).toBe(400);
          expect(json.error.code).toBe(-32700);
          expect(json.id).toBe(null);
        });

        it('not a single request object: -32600; `_meta` or its required keys missing: -32602; HTTP 400', async () => {
          const batch = await refused([listenBody('batched', { toolsListChanged: true })]);
          expect(batch.status).toBe(400);
          expect(batch.json.error.code).toBe(-32600);
          const required = ['io.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/clientCapabilities'];
          for (const missing of [undefined, ...required]) {
            const body = listenBody('meta', { toolsListChanged: true });
            if (missing === undefined) delete (body.params as { _meta?: unknown })._meta;
            else delete (body.params._meta as Record<string, unknown>)[missing];
            const { status, json } = await refused(body);
            const without = `without ${missing ?? '_meta'}`; // names the case when an expectation fails
            expect({ [without]: status }).toStrictEqual({ [without]: 400 });
            expect(json.id).toBe('meta');
            expect({ [without]: json.error.code }).toStrictEqual({ [without]: -32602 });
          }
        });

        it('an MCP-Protocol-Version or Mcp-Method header missing or different from the body: -32020, HTTP 400', async () => {
          const body = listenBody('headers', { toolsListChanged: true });
          const { 'mcp-protocol-version': _version, ...withoutVersion } = listenHeaders(bearer(alice));
          const { 'mcp-method': _method, ...withoutMethod } = listenHeaders(bearer(alice));
          const cases: [string, Record<string, string>][] = [
            ['a different version', listenHeaders({ ...bearer(alice), 'mcp-protocol-version': '2025-11-25' })],
            ['no version header', withoutVersion],
            ['no method header', withoutMethod],
            ['a different method', listenHeaders({ ...bearer(alice), 'mcp-method': 'tools/list' })],
          ];
          for (const [what, headers] of cases) {
            const { status, json } = await refused(body, headers);
            // Each expectation names the case: a failure says which one.
            expect({ [what]: status }).toStrictEqual({ [what]: 400 });
            expect({ [what]: json.error.code }).toStrictEqual({ [what]: -32020 });
            expect({ [what]: json.id }).toStrictEqual({ [what]: 'headers' });
          }
        });

        it('an unsupported protocol version: -32022, HTTP 400, data.supported and data.requested', async () => {
          const body = listenBody(
            'version',
            { toolsListChanged: true },
            { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' },
          );
          const { status, json } = await refused(
            body,
            listenHeaders({ ...bearer(alice), 'mcp-protocol-version': '2099-01-01' }),
          );
          expect(status).toBe(400);
          expect(json.id).toBe('version');
          expect(json.error.code).toBe(-32022);
          expect(json.error.data.supported).toContain(PROTOCOL_VERSION);
          expect(json.error.data.requested).toBe('2099-01-01');
        });

        it('a malformed filter: -32602, HTTP 400, naming the field', async () => {
          const cases: [unknown, string][] = [
            [{ toolsListChanged: 'yes' }, 'toolsListChanged'],
            [{ promptsListChanged: 1 }, 'promptsListChanged'],
            [{ resourcesListChanged: null }, 'resourcesListChanged'],
            [{ resourceSubscriptions: 'note://alice/x' }, 'resourceSubscriptions'],
            [{ resourceSubscriptions: [42] }, 'resourceSubscriptions'],
            [{ resourceSubscriptions: ['not a uri'] }, 'resourceSubscriptions'],
            [{ resourceSubscriptions: ['notes/relative'] }, 'resourceSubscriptions'],
            [[], 'notifications'],
          ];
          for (const [notifications, field] of cases) {
            const { status, json } = await refused(listenBody('filter', notifications as Record<string, unknown>));
            const sent = JSON.stringify(notifications); // names the case when an expectation fails
            expect({ [sent]: status }).toStrictEqual({ [sent]: 400 });
            expect(json.id).toBe('filter');
            expect(json.error.code).toBe(-32602);
            expect({ [sent]: json.error.message }).toStrictEqual({ [sent]: expect.stringContaining(field) });
          }
          for (const taskIds of ['task-1', [7], Array.from({ length: 1001 }, (_, i) => `task-${i}`)]) {
            const { status, json } = await refused(listenBody('filter', { taskIds }, TASKS_META));
            expect(status).toBe(400);
            expect(json.error.code).toBe(-32602);
            expect(json.error.message).toMatch(/taskIds/);
          }
          const body = listenBody('filter', {});
          delete (body.params as { notifications?: unknown }).notifications;
          const { status, json } = await refused(body);
          expect(status).toBe(400);
          expect(json.error.code).toBe(-32602);
          expect(json.error.message).toMatch(/notifications/);
        });

        it('reports the first failing check in the spec order', async () => {
          const future = { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' };
          const withoutMeta = listenBody('order', { toolsListChanged: true });
          delete (withoutMeta.params as { _meta?: unknown })._meta;
          const cases: [string, unknown, Record<string, string>, number][] = [
            [
              '_meta missing, and a header mismatch',
              withoutMeta,
              listenHeaders({ ...bearer(alice), 'mcp-protocol-version': '2099-01-01' }),
              -32602,
            ],
            [
              'a header mismatch, and an unsupported version',
              listenBody('order', { toolsListChanged: true }, future),
              listenHeaders(bearer(alice)),
              -32020,
            ],
            [
              'an unsupported version, and taskIds undeclared',
              listenBody('order', { taskIds: ['t'] }, future),
              listenHeaders({ ...bearer(alice), 'mcp-protocol-version': '2099-01-01' }),
              -32022,
            ],
            [
              'taskIds undeclared, and a malformed flag',
              listenBody('order', { taskIds: ['t'], toolsListChanged: 'yes' }),
              listenHeaders(bearer(alice)),
              -32021,
            ],
          ];
          for (const [what, body, headers, code] of cases) {
            const { status, json } = await refused(body, headers);
            // Each expectation names the case: a failure says which one.
            expect({ [what]: status }).toStrictEqual({ [what]: 400 });
            expect({ [what]: json.error.code }).toStrictEqual({ [what]: code });
          }
        });

        it('1001 URIs: -32602, HTTP 400, naming the limit; 1000 are accepted', async () => {
          const uris = Array.from({ length: 1001 }, (_, i) => `note://alice/bulk-${i}`);
          const { status, json } = await refused(listenBody('bulk', { resourceSubscriptions: uris }));
          expect(status).toBe(400);
          expect(json.error.code).toBe(-32602);
          expect(json.error.message).toMatch(/resourceSubscriptions/);
          expect(json.error.message).toMatch(/1000/);
          const { honored } = await openStream(app, alice, 'bulk', { resourceSubscriptions: uris.slice(0, 1000) });
          expect(sorted(honored.resourceSubscriptions as string[])).toStrictEqual(sorted(uris.slice(0, 1000)));
        });
      });
    });

    describe('MAX_SUBSCRIPTIONS=2, KEEPALIVE_MS=200', () => {
      let app: SampleApp;
      beforeAll(async () => {
        app = await starting.limited;
      }, 60_000);
      afterAll(async () => {
        await app?.stop();
      });
      beforeEach(async () => {
        // Slots are freed when the server sees the previous test's clients hang up.
        await eventually(async () => (await openStreamCount(app)) === 0, 'no stream open before the test');
      });

      it('refuses the third listen with HTTP 503, Retry-After and -32603 "Subscription limit reached"; a freed slot is reusable', async () => {
        const first = await openStream(app, alice, 'one', { toolsListChanged: true });
        await openStream(app, bob, 'two', { toolsListChanged: true });
        const third = await listenRaw(app, carol, 'three', { toolsListChanged: true });
        const { status, json } = await refusal(third);
        expect(status).toBe(503);
        expect(String(third.headers['retry-after'])).toMatch(/^\d+$|GMT$/);
        expect(json.id).toBe('three');
        expect(json.error?.code).toBe(-32603);
        expect(json.error.message).toBe('Subscription limit reached');
        first.stream.close();
        await eventually(async () => (await openStreamCount(app)) === 1, 'the slot freed');
        const { honored } = await openStream(app, carol, 'three', { toolsListChanged: true });
        expect(honored).toStrictEqual({ toolsListChanged: true });
      });

      it('writes ": keepalive" comments on an idle stream', async () => {
        const { stream } = await openStream(app, alice, uid('idle'), { toolsListChanged: true });
        await stream.until(() => stream.comments.filter((c) => c === 'keepalive').length >= 2, 'two keepalives');
        expect(stream.events.length).toBe(1); // keepalives are comments, not messages
      });

      it('keeps the latest update of every URI a paused reader follows, one queued per URI; the paused reader holds back no other stream', async () => {
        const sentinel = await Sentinel.create(app);
        const names = Array.from({ length: 50 }, () => uid('flood'));
        const uris = names.map((name) => `note://alice/${name}`);
        // The listen id is in every frame: a long one fills the paused reader's socket after a few dozen
        // events rather than tens of thousands, so the hub has to queue for it.
        const pausedId = `paused-${'x'.repeat(60_000)}`;
        // The raw reader for the paused one: only it can stop reading its socket.
        const paused = await openStream(app, alice, pausedId, { resourceSubscriptions: [...uris, sentinel.uri] });
        const live = await watch(app, sentinel, alice, 'live', { resourceSubscriptions: uris });
        paused.stream.pause();
        const expected: string[] = [];
        let stats: any;
        for (let round = 0; round < 10 && stats?.queued !== names.length; round++) {
          for (const name of names) {
            const res = await putNote(app, alice, `note://alice/${name}`, `round ${round}`);
            expect(res.status).toBe(round === 0 ? 201 : 200);
            expected.push(`${UPDATED} note://alice/${name}`);
          }
          stats = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
          expect(stats.queued).toBeLessThanOrEqual(names.length); // at most one queued event per URI followed
        }
        // A whole round while the socket was full: one queued update per URI, none dropped.
        expect(stats.queued).toBe(names.length);
        expect(stats.dropped).toBe(0);
        await sentinel.fire();
        // the live reader got every update, in order
        expect(await live.next({ ordered: true })).toStrictEqual(expected);
        paused.stream.resume();
        await sentinel.fire();
        await paused.stream.until(
          () => paused.stream.events.some((e) => e.json?.params?.uri === sentinel.uri),
          'the paused reader to catch up',
          10_000,
        );
        const received = new Set(paused.stream.events.map((e) => e.json?.params?.uri));
        for (const uri of uris) expect(received.has(uri)).toBe(true);
        for (const event of paused.stream.events) {
          expect(event.json?.params?._meta?.[SUBSCRIPTION_ID]).toBe(pausedId); // whole frames, with their id
        }
      }, 60_000); // up to 500 writes, then up to 10 s for the paused reader

      it('SIGTERM still exits 0 while a reader has stopped reading; a reading client gets its result', async () => {
        const names = Array.from({ length: 50 }, () => uid('stuck'));
        const stuckId = `stuck-${'x'.repeat(60_000)}`;
        const stuck = await openStream(app, alice, stuckId, {
          resourceSubscriptions: names.map((name) => `note://alice/${name}`),
        });
        const healthy = await openStream(app, bob, 'healthy', { toolsListChanged: true });
        stuck.stream.pause();
        let stats: any;
        for (let round = 0; round < 10 && !(stats?.queued > 0); round++) {
          for (const name of names) await putNote(app, alice, `note://alice/${name}`, `round ${round}`);
          stats = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
        }
        expect(stats.queued).toBeGreaterThan(0); // the stuck reader's socket filled
        expect(await app.stop('SIGTERM')).toBe(0);
        await healthy.stream.end();
        const last = healthy.stream.events.at(-1)!.json;
        expect(last.id).toBe('healthy');
        expect(last.result?.resultType).toBe('complete');
      }, 60_000); // up to 500 writes, then a stop allowed 15 s
    });

    describe('MAX_SUBSCRIPTIONS_PER_PRINCIPAL=2, STALL_TIMEOUT_MS=500', () => {
      let app: SampleApp;
      beforeAll(async () => {
        app = await starting.fair;
      }, 60_000);
      afterAll(async () => {
        await app?.stop();
      });
      beforeEach(async () => {
        await eventually(async () => (await openStreamCount(app)) === 0, 'no stream open before the test');
      });

      it("refuses a principal's third listen with 503 and Retry-After while another principal opens theirs; a freed slot is reusable", async () => {
        const first = await openStream(app, alice, 'a1', { toolsListChanged: true });
        await openStream(app, alice, 'a2', { toolsListChanged: true });
        const third = await listenRaw(app, alice, 'a3', { toolsListChanged: true });
        const { status, json } = await refusal(third);
        expect(status).toBe(503);
        expect(String(third.headers['retry-after'])).toMatch(/^\d+$|GMT$/);
        expect(json.id).toBe('a3');
        expect(json.error?.code).toBe(-32603);
        expect(json.error.message).toBe('Subscription limit reached');
        // Others are not crowded out: bob opens both of his.
        await openStream(app, bob, 'b1', { toolsListChanged: true });
        const { honored } = await openStream(app, bob, 'b2', { toolsListChanged: true });
        expect(honored).toStrictEqual({ toolsListChanged: true });
        first.stream.close();
        await eventually(async () => (await openStreamCount(app)) === 3, "alice's first slot freed");
        await openStream(app, alice, 'a3', { toolsListChanged: true });
      });

      it('closes a stream whose client stopped reading, counting it in stats; a reading stream stays open', async () => {
        const names = Array.from({ length: 50 }, () => uid('stall'));
        // A long listen id is in every frame: the stopped reader's socket fills after a few rounds.
        const stalledId = `stalled-${'x'.repeat(60_000)}`;
        const stalled = await openStream(app, alice, stalledId, {
          resourceSubscriptions: names.map((name) => `note://alice/${name}`),
        });
        const healthy = await openStream(app, bob, 'healthy', { toolsListChanged: true });
        const before = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
        expect(before.closed.stalled).toBe(0);
        stalled.stream.pause();
        let stats: any;
        for (let round = 0; round < 10 && !(stats?.queued > 0 || stats?.closed.stalled > 0); round++) {
          for (const name of names) await putNote(app, alice, `note://alice/${name}`, `round ${round}`);
          stats = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
        }
        expect(stats.queued > 0 || stats.closed.stalled > 0).toBe(true); // the stopped reader's socket filled
        stats = await eventually(async () => {
          const body = (await app.api(alice, 'GET', '/api/subscriptions/stats')).body;
          return body.closed.stalled >= 1 ? body : undefined;
        }, 'the stopped reader closed as stalled');
        expect(stats.closed.stalled).toBe(1);
        expect(stats.openStreams).toBe(1); // the reading stream is still open
        await app.api(carol, 'POST', '/api/catalog/tools');
        await healthy.stream.until(
          () => healthy.stream.events.some((e) => e.json?.method === TOOLS),
          'the reading stream to get the tools change',
        );
        // The stopped reader was cut off: resuming reads whatever was buffered, then the end.
        stalled.stream.resume();
        await stalled.stream.end();
        expect(stalled.stream.events.every((e) => e.json?.result === undefined)).toBe(true); // no terminal result
      }, 60_000); // up to 500 writes, then the stall timeout
    });

    describe('MCP_CONFORMANCE=1', () => {
      let app: SampleApp;
      beforeAll(async () => {
        app = await starting.conformance;
      }, 60_000);
      afterAll(async () => {
        await app?.stop();
      });

      it('serves a tokenless /mcp request as the principal `conformance`', async () => {
        const discover = await app.mcp(undefined, 'server/discover');
        expect(discover.status).toBe(200);
        expect(discover.message?.result?.capabilities).toBeTruthy();
        const n = uid('conformance');
        const { honored } = await openStream(app, undefined, uid('anonymous'), {
          resourceSubscriptions: [`note://shared/${n}`, `note://alice/${n}`, `note://bob/${n}`, `note://carol/${n}`],
        });
        expect(honored).toStrictEqual({ resourceSubscriptions: [`note://shared/${n}`] });
      });

      it('still answers 401 to a wrong token on /mcp, and to a tokenless REST call', async () => {
        const wrong = await app.mcp('mallory-token', 'server/discover');
        expect(wrong.status).toBe(401);
        expect(wrong.headers.get('www-authenticate') ?? '').toMatch(/^Bearer\b/i);
        const listen = await listenRaw(app, 'mallory-token', uid('wrong'), { toolsListChanged: true });
        expect(listen.status).toBe(401);
        const rest = await app.api(undefined, 'GET', '/api/subscriptions/stats');
        expect(rest.status).toBe(401);
        expect(rest.headers.get('www-authenticate') ?? '').toMatch(/^Bearer\b/i);
      });

      it('registers test_trigger_tool_change and test_trigger_prompt_change, which trigger the list changes', async () => {
        const list = await app.mcp(undefined, 'tools/list');
        const names = ((list.message?.result?.tools ?? []) as { name: string }[]).map((tool) => tool.name);
        expect(names).toContain('test_trigger_tool_change');
        expect(names).toContain('test_trigger_prompt_change');
        // The raw reader, not the listen client: the SIGINT test below stops this instance, and a stream
        // the client closes leaves Node's fetch with a spare connection (nodejs/undici#5845) that the
        // sample's shutdown would wait for, seconds.
        const id = uid('conformance-listen');
        const { stream, honored } = await openStream(app, undefined, id, {
          toolsListChanged: true,
          promptsListChanged: true,
        });
        expect(honored).toStrictEqual({ toolsListChanged: true, promptsListChanged: true });
        const tool = await app.mcp(undefined, 'tools/call', { name: 'test_trigger_tool_change', arguments: {} });
        expect(tool.message?.result).toBeTruthy();
        expect(tool.message.result.isError).not.toBe(true);
        const toolEvent = await stream.event(2);
        expect(toolEvent.json.method).toBe(TOOLS);
        expect(toolEvent.json.params._meta[SUBSCRIPTION_ID]).toBe(id);
        const prompt = await app.mcp(undefined, 'tools/call', { name: 'test_trigger_prompt_change', arguments: {} });
        expect(prompt.message?.result).toBeTruthy();
        expect(prompt.message.result.isError).not.toBe(true);
        const promptEvent = await stream.event(3);
        expect(promptEvent.json.method).toBe(PROMPTS);
        expect(promptEvent.json.params._meta[SUBSCRIPTION_ID]).toBe(id);
      });

      it('SIGINT also ends every open stream gracefully and exits 0', async () => {
        const { stream } = await openStream(app, undefined, 'interrupted', { toolsListChanged: true });
        const code = await app.stop('SIGINT');
        await stream.end();
        expect(stream.events.at(-1)?.json?.result?.resultType).toBe('complete');
        expect(code).toBe(0);
      });
    });

    describe('METRICS_PORT', () => {
      let app: SampleApp;
      let port: number;
      let metricsUrl: string;
      beforeAll(async () => {
        app = await starting.metrics;
        port = await metricsPort;
        metricsUrl = `http://127.0.0.1:${port}/metrics`;
      }, 60_000);
      afterAll(async () => {
        await app?.stop();
      });
      beforeEach(async () => {
        await eventually(async () => (await openStreamCount(app)) === 0, 'no stream open before the test');
      });

      it('serves GET /metrics on that port of HOST without auth: 200, text/plain, the Prometheus text format; the startup line is unchanged', async () => {
        expect(app.stdout()).toBe(`listening on ${app.url} (${sampleHost(kind)})\n`);
        const { status, contentType, exposition } = await scrape(metricsUrl); // no Authorization header
        expect(status).toBe(200);
        expect(contentType).toMatch(/^text\/plain\b/);
        // scrape() parsed every line as a scraper would; the library's meter reports through it.
        expect(exposition!.types.get('mcp_subscriptions_streams')).toBe('gauge');
        expect(
          seriesOf(exposition!, 'mcp_subscriptions_streams').map((sample) => sample.labels['otel_scope_name']),
        ).toStrictEqual(['mcp-subscriptions']);
      });

      it('serves /metrics only on METRICS_PORT: no route of the app there, and nothing but GET and HEAD', async () => {
        const stats = await fetch(`http://127.0.0.1:${port}/api/subscriptions/stats`, { headers: bearer(alice) });
        expect({ status: stats.status, body: (await stats.text()).includes('openStreams') }).toStrictEqual({
          status: 404,
          body: false,
        });
        const post = await fetch(metricsUrl, { method: 'POST' });
        await post.arrayBuffer();
        expect(post.status).toBe(405);
        const head = await fetch(metricsUrl, { method: 'HEAD' });
        expect(head.status).toBe(200);
      });

      procTest('listens on PORT and METRICS_PORT, nothing else', () => {
        expect(listeningPorts(app.child.pid!)).toStrictEqual(
          [Number(new URL(app.baseUrl).port), port].sort((a, b) => a - b),
        );
      });

      it('the gauges in /metrics agree with GET /api/subscriptions/stats while streams are open, the counters once they closed; no label names a principal, URI or task id', async () => {
        const before = await quiescentScrape(app, metricsUrl);
        const note = uid('secret-note');
        const uri = `note://alice/${note}`;
        const foreign = `note://bob/${uid('secret-note')}`;
        const task = await createTask(app, bob);
        const aliceId = uid('secret-listen');
        const bobId = uid('secret-listen');
        // One URI readable, one not (alice may not read bob's notes); one task of bob's own.
        const first = await openStream(app, alice, aliceId, {
          toolsListChanged: true,
          resourceSubscriptions: [uri, foreign],
        });
        expect(first.honored).toStrictEqual({ toolsListChanged: true, resourceSubscriptions: [uri] });
        const second = await openStream(app, bob, bobId, { taskIds: [task] }, TASKS_META);
        const malformed = await listenRaw(app, carol, uid('secret-listen'), { resourceSubscriptions: 'note://x/y' });
        expect((await refusal(malformed)).json.error?.code).toBe(-32602); // refused: invalid-params

        const during = await quiescentScrape(app, metricsUrl);
        expect(during.stats.openStreams).toBe(2);
        expect(gaugesOf(during.exposition)).toStrictEqual({
          openStreams: during.stats.openStreams,
          pendingStreams: during.stats.pendingStreams,
          queued: during.stats.queued,
          following: {
            tools_list_changed: during.stats.listening.toolsListChanged,
            prompts_list_changed: during.stats.listening.promptsListChanged,
            resources_list_changed: during.stats.listening.resourcesListChanged,
            resource_updated: 1, // streams following at least one URI: alice's
            task_status: 1, // streams following at least one task: bob's
          },
        });

        expect((await putNote(app, alice, uri, 'counted')).status).toBe(201);
        expect((await app.api(bob, 'POST', `/api/tasks/${task}/status`, { status: 'completed' })).status).toBe(200);
        expect((await first.stream.event(2)).json?.method).toBe(UPDATED);
        expect((await second.stream.event(2)).json?.method).toBe(TASK);
        first.stream.close(); // closed by the client
        expect((await postCancel(app, bob, bobId)).status).toBe(202); // cancelled
        await second.stream.end();
        await eventually(async () => (await openStreamCount(app)) === 0, 'both streams closed');

        const { stats, exposition } = await quiescentScrape(app, metricsUrl);
        // The workload moved every counter compared below: an agreement of zeros would prove nothing.
        expect({
          opened: stats.opened - before.stats.opened,
          written: stats.written - before.stats.written,
          published: stats.published - before.stats.published,
          client: stats.closed.client - before.stats.closed.client,
          cancelled: stats.closed.cancelled - before.stats.closed.cancelled,
          invalidParams: stats.refusals['invalid-params'] - before.stats.refusals['invalid-params'],
        }).toStrictEqual({ opened: 2, written: 2, published: 3, client: 1, cancelled: 1, invalidParams: 1 });
        expect(countersOf(exposition, stats)).toStrictEqual({
          opened: stats.opened,
          written: stats.written,
          published: stats.published,
          coalesced: stats.coalesced,
          dropped: stats.dropped,
          closed: stats.closed,
          refusals: stats.refusals,
        });
        expect(gaugesOf(exposition)).toStrictEqual({
          openStreams: stats.openStreams,
          pendingStreams: stats.pendingStreams,
          queued: stats.queued,
          following: {
            tools_list_changed: stats.listening.toolsListChanged,
            prompts_list_changed: stats.listening.promptsListChanged,
            resources_list_changed: stats.listening.resourcesListChanged,
            resource_updated: 0,
            task_status: 0,
          },
        });
        // What stats() does not count: one acknowledgement and one authorization per opened listen, and
        // each URI or task id checked once by each check it went through.
        const moved = (name: string, labels: Record<string, string> = {}): number =>
          totalOf(exposition, name, labels) - totalOf(before.exposition, name, labels);
        const check = (name: string, outcome: string): number =>
          moved('mcp_subscriptions_authorization_checks_total', {
            mcp_subscriptions_check: name,
            mcp_subscriptions_check_outcome: outcome,
          });
        expect({
          acks: moved('mcp_subscriptions_ack_duration_count'),
          authorizations: moved('mcp_subscriptions_authorization_duration_count'),
          checks: {
            readable: check('can_read', 'allowed'),
            unreadable: check('can_read', 'denied'),
            subscribed: check('handle_subscribe_resource', 'allowed'),
            task: check('can_access_task', 'allowed'),
          },
        }).toStrictEqual({
          acks: 2,
          authorizations: 2,
          checks: { readable: 1, unreadable: 1, subscribed: 1, task: 1 },
        });
        for (const counter of [
          'mcp_subscriptions_listens_opened_total',
          'mcp_subscriptions_deliveries_total',
          'mcp_subscriptions_streams_closed_total',
          'mcp_subscriptions_authorization_checks_total',
        ]) {
          expect({ counter, type: exposition.types.get(counter) }).toStrictEqual({ counter, type: 'counter' });
        }
        expect(exposition.types.get('mcp_subscriptions_ack_duration')).toBe('histogram');
        expect(exposition.units.get('mcp_subscriptions_ack_duration')).toBe('s');

        const values = labelValues(exposition);
        for (const secret of ['alice', 'bob', 'carol', 'note://', note, foreign, task, aliceId, bobId]) {
          const leaked = values.filter((value) => value.includes(secret));
          expect({ secret, leaked }).toStrictEqual({ secret, leaked: [] });
        }
      });

      it('SIGTERM closes the metrics server too, whatever connections scrapers hold: every stream gets its result, exit 0', async () => {
        const { stream } = await openStream(app, alice, 'metrics-bye', { toolsListChanged: true });
        // fetch keeps its connection to the metrics server alive for the next scrape; and a connection
        // that has sent nothing yet, which Node's server.close() would wait for (its headers timeout).
        expect((await scrape(metricsUrl)).status).toBe(200);
        const silent = netConnect({ port, host: '127.0.0.1' });
        silent.on('error', () => {}); // reset by the closing server: what it is there for
        await new Promise((resolve) => silent.once('connect', resolve));
        const code = await app.stop('SIGTERM');
        await stream.end();
        expect(stream.events.at(-1)?.json?.result?.resultType).toBe('complete');
        expect(code).toBe(0);
        silent.destroy();
        expect(await acceptsConnections(port)).toBe(false);
      });
    });

    it('refuses to start on an invalid METRICS_PORT (0, not a number, out of range, equal to PORT) or one in use, naming it', async () => {
      const taken = createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      const takenPort = (taken.address() as { port: number }).port;
      const samePort = String(await freePort());
      try {
        await Promise.all(
          [
            { METRICS_PORT: '0' },
            { METRICS_PORT: 'abc' },
            { METRICS_PORT: '65536' },
            { PORT: samePort, METRICS_PORT: samePort },
            { METRICS_PORT: String(takenPort) },
          ].map(async (env) => {
            const started = startSample(kind, env);
            await expect(started).rejects.toThrow(/exited with code [1-9]/);
            await expect(started).rejects.toThrow('METRICS_PORT');
          }),
        );
      } finally {
        await new Promise((resolve) => taken.close(resolve));
      }
    }, 60_000); // five samples starting at once (startSample allows each 30 s)

    it('refuses to start on an invalid KEEPALIVE_MS, MAX_SUBSCRIPTIONS, MAX_SUBSCRIPTIONS_PER_PRINCIPAL or STALL_TIMEOUT_MS, naming it', async () => {
      await Promise.all(
        ['KEEPALIVE_MS', 'MAX_SUBSCRIPTIONS', 'MAX_SUBSCRIPTIONS_PER_PRINCIPAL', 'STALL_TIMEOUT_MS'].map(
          async (variable) => {
            const started = startSample(kind, { [variable]: '-5' });
            await expect(started).rejects.toThrow(/exited with code [1-9]/);
            await expect(started).rejects.toThrow(variable);
          },
        ),
      );
    }, 60_000); // four samples starting at once (startSample allows each 30 s)

    it('refuses to start with REDIS_URL and REDIS_CLUSTER both set, naming both; and on a malformed REDIS_CLUSTER, naming it', async () => {
      // All five at once, as the test above does: each start is a process of its own, and one after
      // the other they cost the suite a start each, times every host.
      const both = async (): Promise<void> => {
        const started = startSample(kind, {
          REDIS_URL: 'redis://127.0.0.1:6379',
          REDIS_CLUSTER: '127.0.0.1:7000,127.0.0.1:7001',
        });
        await expect(started).rejects.toThrow(/exited with code [1-9]/);
        await expect(started).rejects.toThrow(/REDIS_URL.*REDIS_CLUSTER|REDIS_CLUSTER.*REDIS_URL/);
      };
      const malformed = async (value: string): Promise<void> => {
        const started = startSample(kind, { REDIS_CLUSTER: value });
        await expect(started).rejects.toThrow(/exited with code [1-9]/);
        await expect(started).rejects.toThrow('REDIS_CLUSTER');
      };
      await Promise.all([
        both(),
        ...['127.0.0.1', '127.0.0.1:7000,', 'http://127.0.0.1:7000', '127.0.0.1:99999'].map(malformed),
      ]);
    }, 60_000); // five samples starting at once (startSample allows each 30 s)

    it('refuses to start with DATABASE_URL beside REDIS_URL or REDIS_CLUSTER, naming both; and on a malformed DATABASE_URL, naming it and never its credentials', async () => {
      // A test of its own, after the one above: three starts at once, not eight, so that a loaded
      // machine does not make a start that refuses look like one that hangs.
      const refused = async (env: Record<string, string>, ...names: string[]): Promise<string> => {
        const started = startSample(kind, env, { startTimeoutMs: 60_000 });
        const message = await started.then(
          () => '',
          (error: Error) => error.message,
        );
        expect(message).toMatch(/exited with code [1-9]/);
        for (const name of names) expect(message).toContain(name);
        return message;
      };
      const database = 'postgres://127.0.0.1:5432/test';
      const secret = 's3cret-password';
      await Promise.all([
        refused({ DATABASE_URL: database, REDIS_URL: 'redis://127.0.0.1:6379' }, 'DATABASE_URL', 'REDIS_URL'),
        refused({ DATABASE_URL: database, REDIS_CLUSTER: '127.0.0.1:7000' }, 'DATABASE_URL', 'REDIS_CLUSTER'),
        // No host (pg would fall back to a Unix socket that no other instance shares): the message names
        // the variable, and the password in the value is never printed.
        (async () => {
          const message = await refused({ DATABASE_URL: `postgres://app:${secret}@/test` }, 'DATABASE_URL');
          expect(message).not.toContain(secret);
        })(),
      ]);
    }, 90_000); // three samples starting at once (each allowed 60 s here)

    it("MAX_BUFFER is passed through as the library defines it: the library removed `maxBuffer`, so a set one stops the app at start with the library's message", async () => {
      // Spawned here rather than by startSample, to read the whole stderr: 'close' waits for the pipes.
      const { command, args, env } = sampleCommand(kind);
      const child = spawn(command, args, {
        cwd: REPO_ROOT,
        env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env, MAX_BUFFER: '100' },
      });
      let stdout = '';
      let stderr = '';
      // A sample that starts after all is stopped at its `listening on` line: the assertion says so.
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
        if (stdout.includes('listening on')) child.kill('SIGKILL');
      });
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
      expect({ code, stdout }).toStrictEqual({ code: 1, stdout: '' });
      expect(stderr).toContain('ERR_MCP_SUBSCRIPTIONS_REMOVED_OPTION');
      expect(stderr).toMatch(
        /Option `maxBuffer` of .* was removed: a stream's queue holds one entry per key its filter follows/,
      );
    }, 60_000); // a Nest sample takes up to 30 s to start on a loaded machine

    redisTest(
      'REDIS_URL: instances sharing one Redis each deliver every event, exactly once',
      async () => {
        await withOwnRedis(async (redis) => {
          const [a, b] = await twoInstances(kind, redis.url);
          try {
            // Creating the sentinel is itself an event on every instance: wait until both instances have
            // delivered both creations, so that none arrives late on the streams under test.
            const sentinel = Sentinel.named(a);
            const probes = await Promise.all(
              [a, b].map((instance) =>
                subscribe(instance, carol, uid('probe'), {
                  resourcesListChanged: true,
                  resourceSubscriptions: [sentinel.uri],
                }),
              ),
            );
            await sentinel.createOn(a, b);
            for (const probe of probes) {
              const seen: Record<string, number> = { [RESOURCES]: 0, [UPDATED]: 0 };
              // Both sentinel creations: a list change and an update from each instance.
              await probe.waitFor((n) => ++seen[n.method]! >= 2 && seen[RESOURCES]! >= 2 && seen[UPDATED]! >= 2, {
                timeoutMs: 5000,
              });
            }
            const name = uid('bridged');
            const uri = `note://alice/${name}`;
            const filter = { toolsListChanged: true, resourcesListChanged: true, resourceSubscriptions: [uri] };
            const onA = await watch(a, sentinel, alice, uid('on-a'), filter);
            const onB = await watch(b, sentinel, alice, uid('on-b'), filter);
            const bobOnB = await watch(b, sentinel, bob, uid('bob-on-b'), { resourceSubscriptions: [uri] });

            expect((await putNote(a, alice, `note://alice/${name}`, 'x')).status).toBe(201);
            await sentinel.fire(a);
            expect(await onA.next()).toStrictEqual(sorted([RESOURCES, `${UPDATED} ${uri}`])); // published here
            // published on the other instance
            expect(await onB.next()).toStrictEqual(sorted([RESOURCES, `${UPDATED} ${uri}`]));
            expect(await bobOnB.next()).toStrictEqual([]); // the read check still holds across instances

            expect((await b.api(bob, 'POST', '/api/catalog/tools')).status).toBe(202);
            await sentinel.fire(b);
            expect(await onA.next()).toStrictEqual([TOOLS]); // published on the other instance
            expect(await onB.next()).toStrictEqual([TOOLS]); // published here
            expect(await bobOnB.next()).toStrictEqual([]);

            // No echo: an instance does not get its own events back from Redis.
            await sentinel.fire(a);
            await sentinel.fire(b);
            for (const watcher of [onA, onB]) {
              expect(await watcher.next()).toStrictEqual([]);
              expect(await watcher.next()).toStrictEqual([]);
            }
          } finally {
            for (const app of [a, b]) await app.stop();
          }
        });
      },
      // Two samples and a redis-server to start: give a slow start the time to report its own error.
      90_000,
    );

    redisTest(
      "REDIS_URL: GET /api/subscriptions/stats shows the bus's counters under `bus`, counts only",
      async () => {
        await withOwnRedis(async (redis) => {
          const [a, b] = await twoInstances(kind, redis.url);
          try {
            // The warm-up creates a note on each instance that a stream on the other follows: each
            // instance has published, and received from the other.
            const probes = await warm(a, b, subscribe);
            for (const instance of [a, b]) {
              const stats = await instance.api(alice, 'GET', '/api/subscriptions/stats');
              expect(stats.status).toBe(200);
              const bus = stats.body?.bus;
              expect(bus?.connected).toBe(true);
              for (const counter of ['published', 'received', 'dropped']) expect(typeof bus?.[counter]).toBe('number');
              expect(bus.published).toBeGreaterThanOrEqual(1);
              expect(bus.received).toBeGreaterThanOrEqual(1);
              expect(bus.dropped).toBe(0);
              const text = JSON.stringify(stats.body);
              for (const secret of ['alice', 'bob', 'carol', 'note://', 'warm', probes[0]!.id]) {
                expect({ secret, leaked: text.includes(String(secret)) }).toStrictEqual({ secret, leaked: false });
              }
            }
          } finally {
            await Promise.all([a.stop(), b.stop()]);
          }
        });
      },
      90_000,
    );

    /** Two instances of this sample on a Redis of their own, each serving /metrics on a port of its own. */
    async function withMetricsPair(
      run: (
        a: SampleApp,
        b: SampleApp,
        metricsUrls: readonly [string, string],
        redis: { readonly url: string },
      ) => Promise<void>,
    ): Promise<void> {
      await withOwnRedis(async (redis) => {
        const ports = [await freePort(), await freePort()] as const;
        const [a, b] = await twoInstances(kind, redis.url, 'SIGTERM', [
          { METRICS_PORT: String(ports[0]) },
          { METRICS_PORT: String(ports[1]) },
        ]);
        try {
          await run(a, b, [`http://127.0.0.1:${ports[0]}/metrics`, `http://127.0.0.1:${ports[1]}/metrics`], redis);
        } finally {
          await Promise.all([a.stop(), b.stop()]);
        }
      });
    }

    redisTest(
      "REDIS_URL and METRICS_PORT: each instance's bus metrics agree with the `bus` of its stats route",
      async () => {
        await withMetricsPair(async (a, b, metricsUrls, redis) => {
          // Each instance publishes, and receives what the other published.
          const probes = await warm(a, b, subscribe);
          for (const [instance, url] of [
            [a, metricsUrls[0]],
            [b, metricsUrls[1]],
          ] as const) {
            const { stats, exposition } = await quiescentScrape(instance, url);
            expect(stats.bus.received).toBeGreaterThanOrEqual(1); // an agreement of zeros would prove nothing
            expect({
              connected: totalOf(exposition, metric('bus_connected')),
              published: totalOf(exposition, metric('bus_published_total')),
              received: totalOf(exposition, metric('bus_received_total')),
              dropped: totalOf(exposition, metric('bus_dropped_total')),
            }).toStrictEqual({
              connected: stats.bus.connected ? 1 : 0,
              published: stats.bus.published,
              received: stats.bus.received,
              dropped: stats.bus.dropped,
            });
            expect(exposition.types.get(metric('bus_connected'))).toBe('gauge');
            const values = labelValues(exposition);
            for (const secret of ['alice', 'bob', 'carol', 'note://', 'warm', probes[0]!.id, redis.url]) {
              const leaked = values.filter((value) => value.includes(String(secret)));
              expect({ secret, leaked }).toStrictEqual({ secret, leaked: [] });
            }
          }
        });
      },
      90_000,
    );

    redisTest(
      'REDIS_URL and METRICS_PORT: an event received from the other instance is timed in mcp_subscriptions_bus_lag (seconds)',
      async () => {
        await withMetricsPair(async (a, b, metricsUrls) => {
          const metricsOfB = metricsUrls[1];
          await warm(a, b, subscribe);
          const before = await quiescentScrape(b, metricsOfB);
          // A stream on b follows a note that a changes: a's event reaches b over Redis.
          const uri = `note://alice/${uid('lag')}`;
          const onB = await subscribe(b, alice, uid('lag'), { resourceSubscriptions: [uri] });
          expect((await putNote(a, alice, uri, 'timed')).status).toBe(201);
          await onB.waitFor(isUpdateOf(uri), { timeoutMs: 5000 });
          const after = await quiescentScrape(b, metricsOfB);
          const lagged =
            totalOf(after.exposition, metric('bus_lag_count')) - totalOf(before.exposition, metric('bus_lag_count'));
          expect(after.stats.bus.received - before.stats.bus.received).toBeGreaterThanOrEqual(1);
          expect(lagged).toBeGreaterThanOrEqual(1);
          expect(after.exposition.types.get(metric('bus_lag'))).toBe('histogram');
          expect(after.exposition.units.get(metric('bus_lag'))).toBe('s');
        });
      },
      90_000,
    );

    redisTest(
      'REDIS_URL: notifications/cancelled sent to the other instance ends the stream; another principal’s does not',
      async () => {
        await withOwnRedis(async (redis) => {
          const [a, b] = await twoInstances(kind, redis.url);
          try {
            const sentinel = await Sentinel.create(a, b);
            await warm(a, b, subscribe);
            await expectCancelAcross(watch, sentinel, a, b, { othersFirst: { fireVia: a } });
          } finally {
            await Promise.all([a.stop(), b.stop()]);
          }
        });
      },
      90_000,
    );

    redisTest(
      'REDIS_URL: redis-server stopped and restarted: each instance keeps serving its own streams, and delivery across them resumes',
      async () => {
        const redis = await startRedis();
        if (redis === undefined) throw new Error('redis-server could not be started');
        const [a, b] = await twoInstances(kind, redis.url);
        let restarted: Awaited<ReturnType<typeof startRedis>>;
        try {
          const sentinel = await Sentinel.create(a, b);
          await warm(a, b, subscribe);
          const name = uid('outage');
          const uri = `note://alice/${name}`;
          const onA = await watch(a, sentinel, alice, uid('outage-a'), { resourceSubscriptions: [uri] });

          await redis.stop();
          // While Redis is down an instance still delivers what it publishes itself, and writes succeed.
          expect((await putNote(a, alice, `note://alice/${name}`, 'while down')).status).toBe(201);
          await sentinel.fire(a);
          expect(await onA.next()).toStrictEqual([`${UPDATED} ${uri}`]);

          restarted = await startRedis({ port: redis.port });
          if (restarted === undefined) throw new Error('redis-server could not be restarted');
          // Once both instances are back on Redis, a change on b reaches the stream on a again.
          // Each instance keeps its own notes: the first write on b creates it there.
          await untilDelivered(
            b,
            alice,
            uri,
            onA.subscription,
            'an update published on b reaching the stream on a after the restart',
            { waitMs: 100, timeoutMs: 30_000, intervalMs: 200 },
          );
        } finally {
          await Promise.all([a.stop(), b.stop()]);
          await restarted?.stop();
        }
      },
      120_000,
    );

    describe('HOST unset; shutdown', () => {
      let app: SampleApp;
      beforeAll(async () => {
        app = await starting.shutdown;
      }, 60_000);

      it('binds 127.0.0.1 when HOST is unset', () => {
        expect(app.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      });

      it('SIGTERM ends every open stream with the terminal result, then the process exits 0', async () => {
        const listeners: [string, string | number, Record<string, unknown>][] = [
          [alice, 'bye', { toolsListChanged: true }],
          [bob, 0, { resourceSubscriptions: ['note://bob/bye'] }],
          [carol, 99, { promptsListChanged: true, resourcesListChanged: true }],
        ];
        const open = [];
        for (const [token, id, filter] of listeners) open.push({ id, ...(await openStream(app, token, id, filter)) });
        const code = await app.stop('SIGTERM');
        for (const { id, stream } of open) {
          await stream.end();
          expect(stream.events.length).toBe(2);
          const last = stream.events[1]!.json;
          expect(last.jsonrpc).toBe('2.0');
          expect(last.id).toBe(id);
          expect(last.error).toBe(undefined);
          expect(last.result.resultType).toBe('complete');
          expect(last.result._meta[SUBSCRIPTION_ID]).toBe(id);
        }
        expect(code).toBe(0);
      });
    });
  });
}
