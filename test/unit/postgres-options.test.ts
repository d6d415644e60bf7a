/**
 * The PostgreSQL bus without a server: its option checks (a code each, messages that name the field),
 * its channel names (derived as on Redis, every one within PostgreSQL's 63-byte identifiers), the
 * quoting of identifiers, and the wire's `ref` message that spilled messages travel as.
 */
import { describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import pg from 'pg';
import { ErrorCode } from 'mcp-subscriptions';
import { PostgresBus, type PostgresBusOptions } from 'mcp-subscriptions/postgres';
import { Channels, MAX_CHANNEL_PREFIX_BYTES } from '../../adapters/postgres/channels.ts';
import {
  POSTGRES_BUS_OPTION_KEYS,
  quoteIdentifier,
  resolvePostgresBusOptions,
} from '../../adapters/postgres/options.ts';
import { isStatementError, spillTableDdl } from '../../adapters/postgres/spill.ts';
import { Wire } from '../../lib/internal.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { optionsErrorOf } from '../helpers/options.ts';

const URL = 'postgres://postgres@127.0.0.1:1/test';
/** A pool that never connects: option checks need no server. */
const pool = new pg.Pool({ connectionString: URL });
const logger = recordingLogger();

const codeOf = (options: unknown): string | undefined =>
  optionsErrorOf(() => new PostgresBus(options as PostgresBusOptions)).code;

describe('PostgresBus options', () => {
  test('defaults: the url form, the routing, the prefix, the spill table and its life', () => {
    const resolved = resolvePostgresBusOptions({ url: URL, logger });
    expect(resolved).toMatchObject({
      connections: { form: 'url', url: URL },
      channelPrefix: 'mcp-subscriptions',
      routing: 'interest',
      resync: true,
      spillTable: { name: 'mcp_subscriptions_spill', sql: '"mcp_subscriptions_spill"' },
      spillTtlMs: 60_000,
      listener: undefined,
    });
    expect(resolved.nodeId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(resolvePostgresBusOptions({ pool, logger }).connections).toStrictEqual({ form: 'pool', pool });
    expect(resolvePostgresBusOptions({ url: URL, spillTable: 'app.Spill_1', logger }).spillTable).toStrictEqual({
      name: 'app.Spill_1',
      sql: '"app"."Spill_1"',
    });
    expect(resolvePostgresBusOptions({ url: URL, spillTable: false, logger }).spillTable).toBe(false);
  });

  test('each mistake throws its own code at construction', () => {
    const cases: [unknown, string][] = [
      [undefined, ErrorCode.OptionsNotObject],
      [{}, ErrorCode.MissingOption],
      [{ url: URL, pool }, ErrorCode.ConflictingOptions],
      [{ url: 'redis://127.0.0.1:6379' }, ErrorCode.InvalidPostgresUrl],
      [{ url: 42 }, ErrorCode.InvalidPostgresUrl],
      [{ pool: {} }, ErrorCode.InvalidPostgresClient],
      [{ pool: new pg.Client({ connectionString: URL }) }, ErrorCode.InvalidPostgresClient],
      [{ pool: { query() {}, connect() {}, on() {}, totalCount: 0 } }, ErrorCode.InvalidPostgresClient],
      [{ url: URL, listener: new pg.Client({ connectionString: URL }) }, ErrorCode.InvalidPostgresClient],
      [{ url: URL, listener: 'postgres://x' }, ErrorCode.InvalidPostgresClient],
      [{ url: URL, channelPrefix: '' }, ErrorCode.InvalidChannelPrefix],
      [{ url: URL, channelPrefix: 'a\0b' }, ErrorCode.InvalidChannelPrefix],
      [{ url: URL, channelPrefix: 'p'.repeat(MAX_CHANNEL_PREFIX_BYTES + 1) }, ErrorCode.InvalidChannelPrefix],
      [{ url: URL, channelPrefix: 'é'.repeat(19) }, ErrorCode.InvalidChannelPrefix],
      [{ url: URL, nodeId: '' }, ErrorCode.InvalidNodeId],
      [{ url: URL, nodeId: 'n'.repeat(201) }, ErrorCode.InvalidNodeId],
      [{ url: URL, routing: { buckets: 4 } }, ErrorCode.InvalidRouting],
      [{ url: URL, resync: 'yes' }, ErrorCode.NotBoolean],
      [{ url: URL, spillTable: '' }, ErrorCode.InvalidSpillTable],
      [{ url: URL, spillTable: 'a.b.c' }, ErrorCode.InvalidSpillTable],
      [{ url: URL, spillTable: 'spill; DROP TABLE x' }, ErrorCode.InvalidSpillTable],
      [{ url: URL, spillTable: '1spill' }, ErrorCode.InvalidSpillTable],
      [{ url: URL, spillTable: 's'.repeat(64) }, ErrorCode.InvalidSpillTable],
      [{ url: URL, spillTable: true }, ErrorCode.InvalidSpillTable],
      [{ url: URL, spillTtlMs: 0 }, ErrorCode.NotPositiveInteger],
      [{ url: URL, spillTtlMs: 2 ** 31 }, ErrorCode.DurationTooLong],
      [{ url: URL, logger: {} }, ErrorCode.InvalidLogger],
      [{ url: URL, chanelPrefix: 'x' }, ErrorCode.UnknownOption],
    ];
    for (const [options, code] of cases) expect({ options, code: codeOf(options) }).toStrictEqual({ options, code });
  });

  test('messages name the field and the limit, suggest the key meant, and never quote a URL', () => {
    const long = optionsErrorOf(() => new PostgresBus({ url: URL, channelPrefix: 'p'.repeat(40) }));
    expect(long.message).toBe(
      "mcp-subscriptions: Expected `channelPrefix` to be at most 36 bytes (UTF-8), so that every channel name fits PostgreSQL's 63-byte identifiers, got 40 bytes",
    );
    expect(optionsErrorOf(() => new PostgresBus({ url: URL, chanelPrefix: 'x' } as never)).message).toContain(
      'did you mean `channelPrefix`?',
    );
    const secret = 'mysql://user:hunter2@db/app';
    const url = optionsErrorOf(() => new PostgresBus({ url: secret }));
    expect(url.message).not.toContain('hunter2');
    expect(url.message).toContain('`url`');
    expect(optionsErrorOf(() => new PostgresBus({ url: URL, pool } as never)).message).toContain(
      '`url` (the bus owns its pool) or `pool` (yours), not both',
    );
    expect(optionsErrorOf(() => new PostgresBus({ url: URL, spillTable: 'x y' })).message).toContain('`spillTable`');
  });

  test('docs/api.md has a row for every key (checked there); the keys are the interfaces', () => {
    expect([...POSTGRES_BUS_OPTION_KEYS].sort()).toStrictEqual(
      [
        'url',
        'pool',
        'listener',
        'channelPrefix',
        'nodeId',
        'routing',
        'resync',
        'spillTable',
        'spillTtlMs',
        'logger',
      ].sort(),
    );
  });
});

describe('PostgresBus channel names', () => {
  const digestOf = (key: string): string => createHash('sha256').update(key).digest('base64url').slice(0, 22);

  test('derived as on Redis: a list kind, or a key by the digest of its kind and itself; no URI or principal in a name', () => {
    const channels = new Channels('app', false);
    expect(channels.list('tools_list_changed')).toBe('app:2:l:tools');
    expect(channels.list('prompts_list_changed')).toBe('app:2:l:prompts');
    expect(channels.list('resources_list_changed')).toBe('app:2:l:resources');
    expect(channels.key('u', 'note://alice/todo')).toBe(`app:2:u:${digestOf('u:note://alice/todo')}`);
    expect(channels.key('t', 'task-1')).toBe(`app:2:t:${digestOf('t:task-1')}`);
    expect(channels.key('c', 'alice')).toBe(`app:2:c:${digestOf('c:alice')}`);
    expect(channels.of('l', 'tools_list_changed')).toBe('app:2:l:tools');
    expect(channels.resync).toBe('app:2:resync');
    const broadcast = new Channels('app', true);
    expect([broadcast.list('tools_list_changed'), broadcast.key('u', 'x:y'), broadcast.resync]).toStrictEqual([
      'app:2:all',
      'app:2:all',
      'app:2:all',
    ]);
  });

  test('every name of the longest prefix allowed fits 63 bytes, whatever the key', () => {
    for (const prefix of ['p'.repeat(MAX_CHANNEL_PREFIX_BYTES), `${'é'.repeat(17)}xx`, '😀'.repeat(9)]) {
      expect(Buffer.byteLength(prefix)).toBe(MAX_CHANNEL_PREFIX_BYTES);
      expect(() => resolvePostgresBusOptions({ url: URL, channelPrefix: prefix, logger })).not.toThrow();
      const channels = new Channels(prefix, false);
      const names = [
        channels.list('resources_list_changed'),
        channels.key('u', 'x'.repeat(10_000)),
        channels.key('t', ''),
        channels.key('c', 'ünïcødé'),
        channels.resync,
        channels.all,
      ];
      expect(Math.max(...names.map((name) => Buffer.byteLength(name)))).toBe(63);
    }
  });

  test('identifiers are quoted for LISTEN and the spill table: case and punctuation kept, quotes doubled', () => {
    expect(quoteIdentifier('Mcp:2:u:AB-_')).toBe('"Mcp:2:u:AB-_"');
    expect(quoteIdentifier('a"b')).toBe('"a""b"');
    expect(spillTableDdl({ name: 'app.spill', sql: '"app"."spill"' })).toBe(
      'CREATE TABLE IF NOT EXISTS "app"."spill" (id bigserial PRIMARY KEY, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())',
    );
  });

  test('a failure of the statement itself (SQLSTATE class 42 or 22) is told from a connection failure', () => {
    expect(isStatementError({ code: '42501' })).toBe(true);
    expect(isStatementError({ code: '22023' })).toBe(true);
    expect(isStatementError({ code: '57P01' })).toBe(false);
    expect(isStatementError(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(isStatementError({ code: 'ECONNREFUSED' })).toBe(false);
  });
});

describe("the wire's ref message (a spilled message's notification)", () => {
  const receiver = new Wire('receiver', { refs: true });
  const sender = new Wire('sender', { refs: true });

  test('decoded by a bus that takes refs; dropped as an unknown type by one that does not (Redis)', () => {
    expect(receiver.decode(sender.ref('42'))).toStrictEqual({ type: 'ref', ref: '42' });
    expect(new Wire('redis-node').decode(sender.ref('42'))).toStrictEqual({ type: 'drop', reason: 'type' });
    expect(sender.decode(sender.ref('42'))).toStrictEqual({ type: 'own' });
    expect(sender.ref('42')).toBe(`${sender.refHead}42"}`);
  });

  test('strictly: digits only, no leading zero, at most 19, exactly its keys', () => {
    const forged = (fields: Record<string, unknown>): string =>
      JSON.stringify({ v: 2, node: 'sender', type: 'ref', ...fields });
    expect(receiver.decode(forged({ ref: '9'.repeat(19) }))).toMatchObject({ type: 'ref' });
    for (const ref of ['', '0', '042', '9'.repeat(20), '1e3', ' 1', 42, null]) {
      expect(receiver.decode(forged({ ref }))).toStrictEqual({ type: 'drop', reason: 'ref' });
    }
    expect(receiver.decode(forged({ ref: '1', extra: 1 }))).toStrictEqual({ type: 'drop', reason: 'keys' });
    expect(receiver.decode(JSON.stringify({ v: 2, node: 'sender', type: 'ref' }))).toStrictEqual({
      type: 'drop',
      reason: 'keys',
    });
    // The first release's format (Redis's legacy channel) never had it.
    expect(receiver.decode(JSON.stringify({ v: 1, node: 'sender', type: 'ref', ref: '1' }), true)).toStrictEqual({
      type: 'drop',
      reason: 'type',
    });
  });
});
