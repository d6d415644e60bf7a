import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { listen } from 'mcp-subscriptions/client';
import { createApp } from './app.ts';

const { app, close } = createApp();
const alice = { authorization: 'Bearer alice-token' };
let server: Server;
let base: string;

beforeAll(async () => {
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await close(); // ends the open streams with their terminal result
  server.closeAllConnections(); // and the spare connection Node's fetch opens when a stream is closed
  await new Promise((resolve) => server.close(resolve));
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
