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
