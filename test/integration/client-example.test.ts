/**
 * The README's client example, as a host app writes it: the app (here the Express sample, built in
 * process with its `createApp()`) listens on a free port, and its own jest test asserts that its
 * service emits the right event. The README quotes the test below; keep them in step.
 */
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { listen } from 'mcp-subscriptions/client';
import { createApp } from '../../sample-app/express/app.ts';

const { app, close } = createApp();
const alice = { authorization: 'Bearer alice-token' };
let server: Server;
let url: string;

beforeAll(async () => {
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
});

afterAll(async () => {
  await close(); // ends the open streams with their terminal result
  server.closeAllConnections(); // and the spare one Node's fetch opens when a stream is closed (README)
  await new Promise((resolve) => server.close(resolve));
});

test('saving a note tells its listeners', async () => {
  const subscription = await listen(url, { resourceSubscriptions: ['note://alice/todo'] }, { headers: alice });
  await request(app).put('/api/notes/alice/todo').set(alice).send({ text: 'buy milk' });
  const update = await subscription.waitFor('notifications/resources/updated');
  expect(update.params.uri).toBe('note://alice/todo');
  await subscription.close();
});

test("the README's client example is this file's test, line for line", () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const block = /<!-- from test\/integration\/client-example\.test\.ts -->\n\n```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(block).toBeDefined();
  const source = readFileSync(new URL(import.meta.url), 'utf8');
  for (const line of block!.split('\n').filter((text) => text.trim() !== '')) {
    expect({ line, found: source.includes(line.trim()) }).toStrictEqual({ line, found: true });
  }
});
