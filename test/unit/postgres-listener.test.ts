/**
 * The PostgreSQL bus's listening connection without a server: a scripted stand-in for node-postgres's
 * `Client` (whose `connect()` and `query()` the test settles, and whose `'error'`, `'end'` and
 * `'notification'` it emits), and fake timers for the backoff. What must hold: one query at a time on a
 * session, none sent on another session than the one it was asked of, a new client after every loss
 * with a doubling wait, events of a lost client ignored, and nothing made after close().
 */
import { afterEach, beforeEach, describe, expect, jest, test } from '@jest/globals';
import { EventEmitter } from 'node:events';
import { ListeningConnection } from '../../adapters/postgres/listener.ts';
import type { PostgresListenClient } from '../../adapters/postgres/options.ts';

interface Deferred {
  resolve(): void;
  reject(error: Error): void;
}

/** A client whose every call is recorded and left pending until the test settles it. */
class ScriptedClient extends EventEmitter implements PostgresListenClient {
  readonly queries: { sql: string; settle: Deferred }[] = [];
  connecting: Deferred | undefined;
  ended = false;

  connect(): Promise<unknown> {
    return new Promise<void>((resolve, reject) => (this.connecting = { resolve, reject }));
  }

  query(sql: string): Promise<unknown> {
    return new Promise<void>((resolve, reject) => this.queries.push({ sql, settle: { resolve, reject } }));
  }

  end(): Promise<unknown> {
    this.ended = true;
    return Promise.resolve();
  }
}

/** Lets promise callbacks run (the connection's chain of queries is promise-based). */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('the listening connection', () => {
  let clients: ScriptedClient[];
  let events: string[];
  let connection: ListeningConnection;

  beforeEach(() => {
    jest.useFakeTimers();
    clients = [];
    events = [];
    connection = new ListeningConnection(
      () => {
        const client = new ScriptedClient();
        clients.push(client);
        return client;
      },
      {
        ready: () => events.push('ready'),
        down: (error) => events.push(`down:${error instanceof Error ? error.message : String(error)}`),
        notification: (channel, payload) => events.push(`${channel}=${payload}`),
      },
    );
  });

  afterEach(async () => {
    await connection.close(10);
    jest.useRealTimers();
  });

  test('is ready once connected, and hands on notifications of its current client only', async () => {
    connection.start();
    expect(connection.isReady()).toBe(false);
    clients[0]!.connecting!.resolve();
    await flush();
    expect([connection.isReady(), events]).toStrictEqual([true, ['ready']]);
    clients[0]!.emit('notification', { channel: 'p:2:all', payload: '{}' });
    clients[0]!.emit('error', new Error('terminating connection due to administrator command'));
    clients[0]!.emit('end');
    clients[0]!.emit('notification', { channel: 'p:2:all', payload: 'late' });
    expect(events).toStrictEqual(['ready', 'p:2:all={}', 'down:terminating connection due to administrator command']);
    expect([connection.isReady(), clients[0]!.ended]).toStrictEqual([false, true]);
  });

  test('sends one query at a time, in order, on the session it was asked of', async () => {
    connection.start();
    clients[0]!.connecting!.resolve();
    await flush();
    const first = connection.query('LISTEN "a"');
    const second = connection.query('UNLISTEN "b"');
    await flush();
    expect(clients[0]!.queries.map((query) => query.sql)).toStrictEqual(['LISTEN "a"']);
    clients[0]!.queries[0]!.settle.resolve();
    await first;
    await flush();
    expect(clients[0]!.queries.map((query) => query.sql)).toStrictEqual(['LISTEN "a"', 'UNLISTEN "b"']);
    clients[0]!.queries[1]!.settle.resolve();
    await second;

    // A query waiting behind another when the session is lost is never sent, here or on the next one.
    const stuck = connection.query('LISTEN "c"');
    const queued = connection.query('LISTEN "d"');
    await flush();
    clients[0]!.emit('end');
    clients[0]!.queries[2]!.settle.reject(new Error('Connection terminated'));
    await expect(stuck).rejects.toThrow('Connection terminated');
    await expect(queued).rejects.toThrow('the listening connection was lost');
    await expect(connection.query('LISTEN "e"')).rejects.toThrow('the listening connection is down');
    jest.advanceTimersByTime(100);
    clients[1]!.connecting!.resolve();
    await flush();
    expect(clients[1]!.queries).toStrictEqual([]);
    const fresh = connection.query('LISTEN "f"');
    await flush();
    expect(clients[1]!.queries.map((query) => query.sql)).toStrictEqual(['LISTEN "f"']);
    clients[1]!.queries[0]!.settle.resolve();
    await fresh;
  });

  test('makes a new client after each failed attempt, waiting 100 ms and doubling to 5 s', async () => {
    connection.start();
    const waits: number[] = [];
    for (let attempt = 0; attempt < 8; attempt++) {
      clients[attempt]!.connecting!.reject(new Error('ECONNREFUSED'));
      await flush();
      let waited = 0;
      while (clients.length === attempt + 1) {
        jest.advanceTimersByTime(50);
        waited += 50;
      }
      waits.push(waited);
    }
    expect(waits).toStrictEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    expect(events.filter((event) => event === 'down:ECONNREFUSED')).toHaveLength(8);
    // Connected again: the wait starts over at 100 ms after the next loss.
    clients[8]!.connecting!.resolve();
    await flush();
    clients[8]!.emit('end');
    jest.advanceTimersByTime(100);
    expect(clients).toHaveLength(10);
  });

  test('close() ends the current client and makes no other, even with a retry pending', async () => {
    connection.start();
    clients[0]!.connecting!.reject(new Error('ECONNREFUSED'));
    await flush();
    await connection.close(10);
    jest.advanceTimersByTime(10_000);
    expect(clients).toHaveLength(1);
    expect(connection.isReady()).toBe(false);
  });

  test('a client that the factory cannot make is a loss like any other, retried', async () => {
    let calls = 0;
    const failing = new ListeningConnection(
      () => {
        calls++;
        throw new Error('no client');
      },
      { ready: () => {}, down: (error) => events.push(`down:${(error as Error).message}`), notification: () => {} },
    );
    failing.start();
    jest.advanceTimersByTime(100);
    expect([calls, events]).toStrictEqual([2, ['down:no client', 'down:no client']]);
    await failing.close(10);
  });
});
