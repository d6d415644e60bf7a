import { afterAll, beforeAll, expect, test } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { listen } from 'mcp-subscriptions/client';
import { buildApp } from './app.ts';

const alice = { authorization: 'Bearer alice-token' };
let app: FastifyInstance;
let base: string;

beforeAll(async () => {
  app = await buildApp();
  base = await app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  await app.close(); // ends the open streams with their terminal result, then closes the server
});

test('saving a note tells its owner, and only its owner', async () => {
  const uris = ['note://alice/todo', 'note://bob/secret'];
  const subscription = await listen(`${base}/mcp`, { resourceSubscriptions: uris }, { headers: alice });
  expect(subscription.honored).toStrictEqual({ resourceSubscriptions: ['note://alice/todo'] });

  const saved = await fetch(`${base}/notes/todo`, {
    method: 'PUT',
    headers: { ...alice, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'buy milk' }),
  });
  expect(saved.status).toBe(200);
  const update = await subscription.waitFor('notifications/resources/updated');
  expect(update.params.uri).toBe('note://alice/todo');
  await subscription.close();
});

test("the SDK serves the rest of MCP as the caller: alice reads her note, bob's is not found", async () => {
  await fetch(`${base}/notes/diary`, {
    method: 'PUT',
    headers: { ...alice, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'dear diary' }),
  });
  const read = async (headers: Record<string, string>) => {
    const uri = 'note://alice/diary';
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'resources/read',
        'mcp-name': uri,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'resources/read',
        params: {
          uri,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    return res.text();
  };
  expect(await read(alice)).toContain('dear diary');
  expect(await read({ authorization: 'Bearer bob-token' })).not.toContain('dear diary');
});
