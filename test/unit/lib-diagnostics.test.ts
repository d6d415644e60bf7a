/**
 * node:diagnostics_channel events: each channel fires on its occasion, and no payload ever carries a
 * URI or a task id (those can be confidential).
 */
import diagnostics from 'node:diagnostics_channel';
import { afterEach, expect, test } from '@jest/globals';
import { DiagnosticsChannel, SubscriptionHub } from 'mcp-subscriptions';
import { createListenHandler } from '../../lib/internal.ts';
import { FakeResponse, recordingLogger, settle } from '../helpers/fake-response.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

const SECRETS = [
  'note://secret-alpha/plan',
  'note://secret-beta/refused',
  'note://secret-gamma/failing',
  'task-secret-delta',
];

/** Cleanups a test registers (diagnostics unsubscribes): run after it, pass or fail. */
const cleanups: Array<() => unknown> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** A payload as text, errors included, so a URI hidden in any field would show. */
function serialize(payload: unknown): string {
  return JSON.stringify(payload, (_key, value: unknown) =>
    value instanceof Error ? { name: value.name, message: value.message, stack: value.stack } : value,
  );
}

test('every channel fires, and no payload names a URI or a task id', async () => {
  const received = new Map<string, unknown[]>();
  for (const name of Object.values(DiagnosticsChannel)) {
    const list: unknown[] = [];
    received.set(name, list);
    const onMessage = (message: unknown) => list.push(message);
    diagnostics.subscribe(name, onMessage);
    cleanups.push(() => diagnostics.unsubscribe(name, onMessage));
  }

  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger });
  const handler = createListenHandler({
    hub,
    capabilities: { toolsListChanged: true, resourceSubscriptions: true, tasks: true },
    keepAliveMs: false,
    canRead: (uri) => {
      if (uri === SECRETS[2]) throw new Error('permission service unavailable');
      return uri !== SECRETS[1];
    },
    canAccessTask: () => true,
  });
  const res = new FakeResponse();
  await handler.handle(
    {
      body: listenBody(
        'L',
        { toolsListChanged: true, resourceSubscriptions: SECRETS.slice(0, 3), taskIds: [SECRETS[3]] },
        { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
      ),
      headers: listenHeaders(),
      principal: 'alice',
      request: {},
    },
    res,
  );
  expect(res.messages()[0].params.notifications).toStrictEqual({
    toolsListChanged: true,
    resourceSubscriptions: [SECRETS[0]],
    taskIds: [SECRETS[3]],
  });

  hub.resourceUpdated(SECRETS[0]!);
  await settle(); // a tick's events reach a stream as one write, at the end of the tick
  res.accept = false;
  hub.taskStatus(
    {
      taskId: SECRETS[3]!,
      status: 'working',
      createdAt: '2026-07-28T00:00:00Z',
      lastUpdatedAt: '2026-07-28T00:00:00Z',
      ttlMs: null,
    },
    'alice',
  );
  await settle(); // this tick's batch (the task status) is written now, and fills the socket
  hub.resourceUpdated(SECRETS[0]!); // queued (the socket is full)
  hub.toolsListChanged(); // queued too: one entry per key the stream follows
  res.clientClose();
  // The SDK's own listen reaching the hub (its bus) past the middleware: refused, and published.
  expect(() => hub.subscribe(() => {})).toThrow(
    expect.objectContaining({ code: 'ERR_MCP_SUBSCRIPTIONS_UNCHECKED_LISTEN' }),
  );
  await hub.close();

  const open = received.get(DiagnosticsChannel.StreamOpen)!;
  const close = received.get(DiagnosticsChannel.StreamClose)!;
  const publish = received.get(DiagnosticsChannel.Publish)!;
  const checkError = received.get(DiagnosticsChannel.CheckError)!;
  expect(open.length).toBe(1);
  expect(open[0]).toStrictEqual({
    principal: 'alice',
    filter: {
      toolsListChanged: true,
      promptsListChanged: false,
      resourcesListChanged: false,
      resourceSubscriptions: 1,
      taskIds: 1,
    },
  });
  expect(close.length).toBe(1);
  expect((close[0] as { reason: string }).reason).toBe('client');
  expect(publish.length).toBe(4);
  expect(publish.map((p) => (p as { kind: string }).kind)).toStrictEqual([
    'resource_updated',
    'task_status',
    'resource_updated',
    'tools_list_changed',
  ]);
  expect(publish[3]).toStrictEqual({
    kind: 'tools_list_changed',
    matched: 1,
    written: 0,
    queued: 1,
    coalesced: 0,
  });
  expect(checkError.length).toBe(1);
  expect((checkError[0] as { stage: string }).stage).toBe('canRead');
  expect(received.get(DiagnosticsChannel.UncheckedListen)).toStrictEqual([{ uncheckedListens: 1 }]);

  const everything = [...received.values()].flat().map(serialize).join('\n');
  for (const secret of SECRETS) {
    // a diagnostics payload must not carry the secret (a failure shows which secret, and where)
    expect(everything).not.toContain(secret);
  }
  for (const [message, details] of logger.warns) {
    expect(serialize([message, details]).includes('secret-')).toBe(false);
  }
});
