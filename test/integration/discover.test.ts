/**
 * `server/discover` and the acknowledgement agree, for every offer (spec §2: a flag is honoured only
 * if the server advertises its capability). Each app is a real Express app: `mcp-subscriptions` in
 * front, the official SDK's `McpServer` behind it registering a tool, a prompt and a resource (which
 * makes the SDK turn `listChanged` on by itself), both over real HTTP.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import express from 'express';
import {
  advertiseOffer,
  ErrorCode,
  SubscriptionHub,
  toServerCapabilities,
  type SubscriptionCapabilities,
} from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { mcpRequest } from '../helpers/sample-app.ts';
import { listen, type SseStream } from '../helpers/sse.ts';

const FLAGS = [
  'toolsListChanged',
  'promptsListChanged',
  'resourcesListChanged',
  'resourceSubscriptions',
  'tasks',
] as const;

/** Every offer: the 32 combinations of the five capabilities. */
const OFFERS: SubscriptionCapabilities[] = Array.from({ length: 2 ** FLAGS.length }, (_, n) =>
  Object.fromEntries(FLAGS.map((flag, bit) => [flag, (n & (1 << bit)) !== 0])),
);

/** Everything a listen may ask for. */
const EVERYTHING = {
  toolsListChanged: true,
  promptsListChanged: true,
  resourcesListChanged: true,
  resourceSubscriptions: ['note://alice/a'],
};

const running: { server: RunningServer; hub: SubscriptionHub }[] = [];
const streams: SseStream[] = [];

afterAll(async () => {
  for (const stream of streams.splice(0)) stream.close();
  for (const { server, hub } of running.splice(0)) {
    await hub.close();
    await server.close();
  }
});

type Advertise = (server: McpServer, offer: SubscriptionCapabilities) => McpServer;

/** The host app: listen in front, the SDK behind, built the way `advertise` says. */
async function start(offer: SubscriptionCapabilities, advertise: Advertise): Promise<string> {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  const handler = createMcpHandler(
    () => {
      const server = advertise(new McpServer({ name: 'discover-test', version: '0.0.0' }), offer);
      server.registerTool('ping', { description: 'Answers pong.' }, () => ({
        content: [{ type: 'text', text: 'pong' }],
      }));
      server.registerPrompt('greet', { description: 'Says hello.' }, () => ({
        messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }],
      }));
      server.registerResource('note', 'note://alice/a', { mimeType: 'text/plain' }, (uri) => ({
        contents: [{ uri: uri.href, text: 'a' }],
      }));
      return server;
    },
    { bus: hub, legacy: 'reject' },
  );
  const node = toNodeHandler(handler);
  const app = express();
  app.post(
    '/mcp',
    mcpSubscriptions({
      hub,
      capabilities: offer,
      canRead: () => true,
      ...(offer.tasks ? { canAccessTask: () => true } : {}),
    }),
    (req, res) => void node(req, res, req.body),
  );
  const server = await listenOn(app);
  running.push({ server, hub });
  return server.url;
}

/** What discover advertises of listen, in the acknowledgement's terms. */
function advertisedFlags(capabilities: any): Record<string, boolean> {
  return {
    toolsListChanged: capabilities?.tools?.listChanged === true,
    promptsListChanged: capabilities?.prompts?.listChanged === true,
    resourcesListChanged: capabilities?.resources?.listChanged === true,
    resourceSubscriptions: capabilities?.resources?.subscribe === true,
  };
}

/** What an acknowledgement honoured, asked for everything. */
function honouredFlags(notifications: any): Record<string, boolean> {
  return {
    toolsListChanged: notifications.toolsListChanged === true,
    promptsListChanged: notifications.promptsListChanged === true,
    resourcesListChanged: notifications.resourcesListChanged === true,
    resourceSubscriptions: Array.isArray(notifications.resourceSubscriptions),
  };
}

async function discoverAndAck(url: string): Promise<{ advertised: any; honoured: any }> {
  const discover = await mcpRequest(url, undefined, 'server/discover');
  expect(discover.status).toBe(200);
  const stream = await listen(url, 'everything', EVERYTHING);
  streams.push(stream);
  expect(stream.status).toBe(200);
  const ack = (await stream.event(1)).json;
  stream.close();
  return { advertised: discover.message?.result?.capabilities, honoured: ack.params.notifications };
}

describe('server/discover never promises more than listen gives', () => {
  it.each(OFFERS.map((offer) => [JSON.stringify(offer), offer] as const))(
    'with advertiseOffer(), for the offer %s, discover and the ack agree',
    async (_name, offer) => {
      const url = await start(offer, advertiseOffer);
      const { advertised, honoured } = await discoverAndAck(url);
      expect(advertisedFlags(advertised)).toStrictEqual(honouredFlags(honoured));
      // And both are exactly the offer (the kinds the app registers are all there).
      expect(honouredFlags(honoured)).toStrictEqual({
        toolsListChanged: offer.toolsListChanged,
        promptsListChanged: offer.promptsListChanged,
        resourcesListChanged: offer.resourcesListChanged,
        resourceSubscriptions: offer.resourceSubscriptions,
      });
      // The Tasks extension is advertised exactly when it is offered.
      expect(advertised?.extensions?.['io.modelcontextprotocol/tasks'] !== undefined).toBe(offer.tasks);
      // The kinds the server serves are still advertised, whatever the offer.
      expect(
        Object.keys(advertised)
          .filter((kind) => ['tools', 'prompts', 'resources'].includes(kind))
          .sort(),
      ).toStrictEqual(['prompts', 'resources', 'tools']);
    },
    30_000,
  );

  it('without it, the SDK turns listChanged on for what it registers: the README case promised resourcesListChanged', async () => {
    // What toServerCapabilities() alone gives the SDK: the reason advertiseOffer() exists.
    const offer = { toolsListChanged: true, resourceSubscriptions: true };
    const url = await start(offer, (server, given) => {
      server.server.registerCapabilities(toServerCapabilities(given));
      return server;
    });
    const { advertised, honoured } = await discoverAndAck(url);
    expect(advertisedFlags(advertised)).toStrictEqual({
      toolsListChanged: true,
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: true,
    });
    expect(honouredFlags(honoured)).toStrictEqual({
      toolsListChanged: true,
      promptsListChanged: false,
      resourcesListChanged: false,
      resourceSubscriptions: true,
    });
  });

  it('advertiseOffer() refuses what is not an MCP server, and checks the offer', () => {
    expect(() => advertiseOffer({} as never, {})).toThrow(expect.objectContaining({ code: ErrorCode.InvalidServer }));
    expect(() => advertiseOffer(null as never, {})).toThrow(expect.objectContaining({ code: ErrorCode.InvalidServer }));
    const server = new McpServer({ name: 'x', version: '0' });
    expect(() => advertiseOffer(server, { toolListChanged: true } as never)).toThrow(
      expect.objectContaining({ code: ErrorCode.UnknownOption }),
    );
  });

  it('works on the low-level Server as well, and leaves kinds the server does not serve unadvertised', () => {
    const server = new McpServer({ name: 'x', version: '0' });
    advertiseOffer(server.server, { promptsListChanged: false, resourceSubscriptions: true });
    server.registerPrompt('p', { description: 'p' }, () => ({ messages: [] }));
    // Prompts are registered (so advertised) but their list changes are not offered; no tools at all.
    expect(server.server.getCapabilities()).toStrictEqual({ prompts: {}, resources: { subscribe: true } });
  });
});
