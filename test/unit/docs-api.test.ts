/**
 * docs/api.md cannot drift: each option table (the one under an `<!-- api-options: … -->` marker) names
 * exactly the keys its entry point's validator accepts, and each default that is a plain value (a
 * number, a boolean, a string, an array of them) is what the resolver applies to options that leave it
 * out. A default the resolver gives as a number or a boolean must be written as that literal; the
 * others ("required", "a random UUID", `new MemoryBus()`) are prose.
 */
import { describe, expect, test } from '@jest/globals';
import Fastify from 'fastify';
import { readFileSync } from 'node:fs';
import {
  DEFAULT_MAX_BODY_BYTES,
  HUB_OPTION_KEYS,
  LISTEN_OPTION_KEYS,
  NODE_ADAPTER_OPTION_KEYS,
  resolveHubOptions,
  resolveListenOptions,
  SubscriptionHub,
} from '../../lib/internal.ts';
import {
  ASYNC_OPTION_KEYS,
  FOR_ROOT_SOURCE,
  resolveModuleOptions,
  resolveRouteOptions,
  ROUTE_OPTION_KEYS,
} from '../../adapters/nest/mcp-subscriptions.options.ts';
import { REDIS_BUS_OPTION_KEYS, resolveRedisBusOptions } from '../../adapters/redis/options.ts';
import { POSTGRES_BUS_OPTION_KEYS, resolvePostgresBusOptions } from '../../adapters/postgres/options.ts';
import { mcpSubscriptions as fastifyPlugin } from '../../adapters/fastify/index.ts';
import {
  LISTEN_OPTION_KEYS as CLIENT_LISTEN_OPTION_KEYS,
  RECONNECT_OPTION_KEYS,
  resolveListen,
  resolveWaitFor,
  WAIT_FOR_OPTION_KEYS,
} from '../../adapters/client/options.ts';
import { hasErrorCode } from '../../lib/index.ts';
import { recordingLogger } from '../helpers/fake-response.ts';

const API_MD = new URL('../../docs/api.md', import.meta.url);

/** One row of an option table: the option names of its first cell, and its default cell as written. */
interface Row {
  readonly names: readonly string[];
  readonly defaultCell: string;
}

/** The cells of a Markdown table row; `\|` inside a cell is a literal bar. */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim().replace(/\\\|/g, '|'));
}

/** Every table under an `<!-- api-<kind>: name -->` marker, by name. */
function tables(markdown: string, kind: 'options' | 'fields'): Map<string, Row[]> {
  const found = new Map<string, Row[]>();
  const lines = markdown.split('\n');
  lines.forEach((line, i) => {
    const marker = new RegExp(`^<!-- api-${kind}: (.+) -->$`).exec(line.trim());
    if (marker === null) return;
    let at = i + 1;
    while (lines[at]?.trim() === '') at++;
    const header = cells(lines[at] ?? '');
    if (!(lines[at] ?? '').trim().startsWith('|')) throw new Error(`docs/api.md:${i + 1}: no table under the marker`);
    const defaultColumn = header.indexOf('default');
    const rows: Row[] = [];
    for (at += 2; (lines[at] ?? '').trim().startsWith('|'); at++) {
      const row = cells(lines[at]!);
      rows.push({
        names: [...row[0]!.matchAll(/`([A-Za-z]+)`/g)].map((match) => match[1]!),
        defaultCell: defaultColumn === -1 ? '' : (row[defaultColumn] ?? ''),
      });
    }
    found.set(marker[1]!, rows);
  });
  return found;
}

/** A default written as one code span holding a JSON-like literal (`1024`, `false`, `'route'`, `['x']`), parsed. */
function literal(cell: string): { value: unknown } | undefined {
  const code = /^`([^`]+)`$/.exec(cell)?.[1];
  if (code === undefined) return undefined;
  try {
    return { value: JSON.parse(code.replace(/'/g, '"')) };
  } catch {
    return undefined;
  }
}

const isPlain = (value: unknown): boolean =>
  ['number', 'boolean', 'string'].includes(typeof value) ||
  (Array.isArray(value) && value.every((item) => typeof item === 'string' || typeof item === 'number'));

const markdown = readFileSync(API_MD, 'utf8');
const optionTables = tables(markdown, 'options');

function table(name: string): Row[] {
  const rows = optionTables.get(name);
  if (rows === undefined) throw new Error(`docs/api.md has no table marked <!-- api-options: ${name} -->`);
  return rows;
}

const namesOf = (rows: readonly Row[]): string[] => rows.flatMap((row) => row.names).sort();

/** Fastify's own register options, which Fastify hands every plugin: accepted, and not the plugin's to document. */
const FASTIFY_REGISTER_OPTIONS = ['prefix', 'logLevel', 'logSerializers'];

/**
 * Loads the Fastify plugin on a fresh instance (no server started) with `options` beside a hub and no
 * capability, as Fastify's loader calls it: the decorator it sets, or the error it hands to `done()`.
 */
function loadFastifyPlugin(options: Record<string, unknown>): { decorated?: unknown; error?: unknown } {
  const app = Fastify();
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  let error: unknown;
  fastifyPlugin(app, { hub, capabilities: {}, ...options }, (failed) => (error = failed));
  return error === undefined ? { decorated: app.mcpSubscriptions } : { error };
}

/**
 * Checks each documented default against `resolved`: a literal must equal the resolved value, and a
 * resolved number or boolean must be documented as a literal. Returns how many defaults it compared.
 */
function expectDefaults(rows: readonly Row[], resolved: Readonly<Record<string, unknown>>): number {
  let compared = 0;
  for (const { names, defaultCell } of rows) {
    for (const name of names) {
      if (!(name in resolved)) continue;
      const value = resolved[name];
      const written = literal(defaultCell);
      if (written !== undefined && isPlain(value)) {
        expect({ option: name, default: written.value }).toEqual({ option: name, default: value });
        compared++;
      } else if (typeof value === 'number' || typeof value === 'boolean') {
        throw new Error(`docs/api.md: the default of \`${name}\` is ${String(value)}, written as "${defaultCell}"`);
      }
    }
  }
  return compared;
}

describe('docs/api.md names exactly the options each entry point accepts', () => {
  test('new SubscriptionHub()', () => {
    expect(namesOf(table('new SubscriptionHub()'))).toEqual([...HUB_OPTION_KEYS].sort());
  });

  test('mcpSubscriptions()', () => {
    expect(namesOf(table('mcpSubscriptions()'))).toEqual([...LISTEN_OPTION_KEYS, ...NODE_ADAPTER_OPTION_KEYS].sort());
  });

  test('McpSubscriptionsModule.forRoot(): its own table and the shared options of mcpSubscriptions()', () => {
    const accepted = [...LISTEN_OPTION_KEYS, ...NODE_ADAPTER_OPTION_KEYS, ...ROUTE_OPTION_KEYS];
    const own = namesOf(table('McpSubscriptionsModule.forRoot()'));
    for (const name of own) expect(accepted).toContain(name);
    expect([...new Set([...own, ...namesOf(table('mcpSubscriptions()'))])].sort()).toEqual([...accepted].sort());
  });

  test('McpSubscriptionsModule.forRootAsync()', () => {
    expect(namesOf(table('McpSubscriptionsModule.forRootAsync()'))).toEqual([...ASYNC_OPTION_KEYS].sort());
  });

  test('new RedisBus()', () => {
    expect(namesOf(table('new RedisBus()'))).toEqual([...REDIS_BUS_OPTION_KEYS].sort());
  });

  test('new PostgresBus()', () => {
    expect(namesOf(table('new PostgresBus()'))).toEqual([...POSTGRES_BUS_OPTION_KEYS].sort());
  });

  test('the Fastify plugin: every documented key is accepted, and every other key the adapters know is refused', () => {
    const documented = namesOf(table('mcpSubscriptions (Fastify)'));
    const candidates = new Set([
      ...documented,
      ...LISTEN_OPTION_KEYS,
      ...NODE_ADAPTER_OPTION_KEYS,
      ...ROUTE_OPTION_KEYS,
    ]);
    const accepted = [...candidates].filter((key) => {
      const { error } = loadFastifyPlugin({ [key]: undefined });
      return !hasErrorCode(error, 'ERR_MCP_SUBSCRIPTIONS_UNKNOWN_OPTION');
    });
    expect(accepted.sort()).toEqual(documented);
    for (const key of FASTIFY_REGISTER_OPTIONS) expect(loadFastifyPlugin({ [key]: undefined }).error).toBeUndefined();
  });

  test('listen(), its reconnect and waitFor()', () => {
    expect(namesOf(table('listen()'))).toEqual([...CLIENT_LISTEN_OPTION_KEYS].sort());
    expect(namesOf(table('listen() reconnect'))).toEqual([...RECONNECT_OPTION_KEYS].sort());
    expect(namesOf(table('waitFor()'))).toEqual([...WAIT_FOR_OPTION_KEYS].sort());
  });

  test('every documented stats() field is one the hub reports, and every one it reports is documented', () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    const fields = tables(markdown, 'fields').get('stats()');
    expect(namesOf(fields ?? [])).toEqual(Object.keys(hub.stats()).sort());
  });
});

describe("docs/api.md's defaults are the ones the resolvers apply", () => {
  const logger = recordingLogger();

  test('new SubscriptionHub()', () => {
    expect(expectDefaults(table('new SubscriptionHub()'), resolveHubOptions({}))).toBe(5);
  });

  test('mcpSubscriptions()', () => {
    const hub = new SubscriptionHub({ logger });
    const resolved = { ...resolveListenOptions({ hub, capabilities: {} }), maxBodyBytes: DEFAULT_MAX_BODY_BYTES };
    expect(expectDefaults(table('mcpSubscriptions()'), resolved)).toBe(8);
  });

  test('McpSubscriptionsModule.forRoot()', () => {
    const module = resolveModuleOptions({ capabilities: {} }, FOR_ROOT_SOURCE);
    // The module resolves the shared options through the engine; its own are the route's and the body limit.
    expect(module.maxBodyBytes).toBe(DEFAULT_MAX_BODY_BYTES);
    expect(expectDefaults(table('McpSubscriptionsModule.forRoot()'), { ...resolveRouteOptions({}) })).toBe(4);
  });

  test('the Fastify plugin', () => {
    const { decorated } = loadFastifyPlugin({});
    const { path } = decorated as { path: string };
    // The shared options are documented as "as in mcpSubscriptions()", whose defaults are checked above.
    expect(expectDefaults(table('mcpSubscriptions (Fastify)'), { path })).toBe(1);
  });

  test('new RedisBus()', () => {
    const resolved = resolveRedisBusOptions({ url: 'redis://127.0.0.1:1', logger });
    expect(expectDefaults(table('new RedisBus()'), { ...resolved })).toBe(2);
  });

  test('new PostgresBus()', () => {
    const resolved = resolvePostgresBusOptions({ url: 'postgres://127.0.0.1:1/db', logger });
    // The spill table resolves to its name and its quoted SQL: the name is what the option takes.
    const spillTable = resolved.spillTable === false ? false : resolved.spillTable.name;
    expect(expectDefaults(table('new PostgresBus()'), { ...resolved, spillTable })).toBe(5);
  });

  test('listen(), its reconnect and waitFor()', () => {
    const listen = resolveListen('http://127.0.0.1:1/mcp', {}, {});
    expect(expectDefaults(table('listen()'), { ...listen })).toBe(6);
    const reconnect = resolveListen('http://127.0.0.1:1/mcp', {}, { reconnect: true }).reconnect;
    expect(expectDefaults(table('listen() reconnect'), { ...reconnect })).toBe(3);
    expect(expectDefaults(table('waitFor()'), resolveWaitFor('x', undefined))).toBe(1);
  });
});
