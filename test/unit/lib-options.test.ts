/**
 * Option validation as users meet it: every mistake throws at construction with the code of its own
 * check (docs/error-codes.md), unknown keys are refused with the nearest known one suggested (or the
 * entry point they belong to), and every error the library throws belongs to its hierarchy.
 */
import { describe, expect, test } from '@jest/globals';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  CheckTimeoutError,
  defineCapabilities,
  ErrorCode,
  hasErrorCode,
  McpSubscriptionsError,
  SubscriptionHub,
} from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { createListenHandler, hubEngine, nearestKey } from '../../lib/internal.ts';
import { FakeResponse, openStream, recordingLogger } from '../helpers/fake-response.ts';
import { thrown } from '../helpers/assert.ts';
import { OPTION_ERROR_CODES, optionsErrorOf } from '../helpers/options.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

/** The error `fn` throws; fails when it throws none. */
/** Asserts an OptionsError with exactly `code`, and returns its message. */
function optionMessage(fn: () => unknown, code: string): string {
  const error = optionsErrorOf(fn);
  expect(error.code).toBe(code);
  return error.message;
}

const logger = recordingLogger();
const hub = new SubscriptionHub({ logger });
const base = { hub, capabilities: { toolsListChanged: true } };

describe('unknown keys, with a suggestion', () => {
  test('the hub: a typo names the nearest option', () => {
    expect(optionMessage(() => new SubscriptionHub({ stallTimeotMs: 10 } as never), ErrorCode.UnknownOption)).toBe(
      'mcp-subscriptions: Unknown option `stallTimeotMs` of new SubscriptionHub(); did you mean `stallTimeoutMs`?',
    );
    expect(
      optionMessage(() => new SubscriptionHub({ MaxSubscriptions: 10 } as never), ErrorCode.UnknownOption),
    ).toMatch(/did you mean `maxSubscriptions`\?$/);
    expect(optionMessage(() => new SubscriptionHub({ retryAfterSecond: 1 } as never), ErrorCode.UnknownOption)).toMatch(
      /did you mean `retryAfterSeconds`\?$/,
    );
  });

  test('a key near nothing lists what the entry point takes', () => {
    const message = optionMessage(() => new SubscriptionHub({ redis: true } as never), ErrorCode.UnknownOption);
    expect(message).toMatch(/^mcp-subscriptions: Unknown option `redis` of new SubscriptionHub\(\); expected one of /);
    for (const key of ['maxSubscriptions', 'bus', 'logger', 'retryAfterSeconds', 'stallTimeoutMs']) {
      expect(message).toContain(`\`${key}\``);
    }
  });

  test('the middleware: a typo of its own options, of the listen options, and a hub option given to it', () => {
    expect(
      optionMessage(() => mcpSubscriptions({ ...base, principle: () => 'a' } as never), ErrorCode.UnknownOption),
    ).toBe('mcp-subscriptions: Unknown option `principle` of mcpSubscriptions(); did you mean `principal`?');
    expect(
      optionMessage(() => mcpSubscriptions({ ...base, canread: () => true } as never), ErrorCode.UnknownOption),
    ).toMatch(/did you mean `canRead`\?$/);
    expect(
      optionMessage(() => mcpSubscriptions({ ...base, maxSubscriptions: 10 } as never), ErrorCode.UnknownOption),
    ).toBe(
      'mcp-subscriptions: Unknown option `maxSubscriptions` of mcpSubscriptions(); it is an option of `new SubscriptionHub()`; pass it there and hand the hub over as `hub`',
    );
    // The hub's removed options, given to the middleware, say what replaced them (not where they go).
    expect(optionMessage(() => mcpSubscriptions({ ...base, maxBuffer: 10 } as never), ErrorCode.RemovedOption)).toMatch(
      /^mcp-subscriptions: Option `maxBuffer` of mcpSubscriptions\(\) was removed: a stream's queue holds one entry per key its filter follows/,
    );
    expect(
      optionMessage(() => mcpSubscriptions({ ...base, overflow: 'close' } as never), ErrorCode.RemovedOption),
    ).toMatch(/^mcp-subscriptions: Option `overflow` of mcpSubscriptions\(\) was removed: .*`stallTimeoutMs`/);
    // Its own options are known to it.
    expect(() => mcpSubscriptions({ ...base, principal: () => 'a', maxBodyBytes: 10 })).not.toThrow();
  });

  test('the engine refuses the adapter-only options it does not take', () => {
    expect(
      optionMessage(() => createListenHandler({ ...base, maxBodyBytes: 10 } as never), ErrorCode.UnknownOption),
    ).toMatch(/^mcp-subscriptions: Unknown option `maxBodyBytes` of createListenHandler\(\); /);
  });

  test('capabilities: an unknown capability names the nearest one', () => {
    expect(optionMessage(() => defineCapabilities({ toolListChanged: true } as never), ErrorCode.UnknownOption)).toBe(
      'mcp-subscriptions: Unknown capability `toolListChanged` of `capabilities`; did you mean `toolsListChanged`?',
    );
    expect(
      optionMessage(() => mcpSubscriptions({ hub, capabilities: { task: true } } as never), ErrorCode.UnknownOption),
    ).toMatch(/did you mean `tasks`\?$/);
  });

  test('the nearest key is a typo, never a guess', () => {
    const known = ['maxBuffer', 'maxSubscriptions', 'overflow', 'bus'];
    expect(nearestKey('maxBufer', known)).toBe('maxBuffer');
    expect(nearestKey('maxbuffer', known)).toBe('maxBuffer');
    expect(nearestKey('maxBuffre', known)).toBe('maxBuffer');
    expect(nearestKey('bsu', known)).toBe('bus');
    expect(nearestKey('redis', known)).toBeUndefined();
    expect(nearestKey('x', known)).toBeUndefined();
  });
});

describe('one code per check', () => {
  test('the hub', () => {
    const cases: [unknown, string][] = [
      ['options', ErrorCode.OptionsNotObject],
      [[], ErrorCode.OptionsNotObject],
      [{ maxSubscriptions: 0 }, ErrorCode.NotPositiveInteger],
      [{ maxSubscriptionsPerPrincipal: true }, ErrorCode.NotPositiveInteger],
      // null is a value, not an absence: a null bound never quietly becomes "no bound".
      [{ maxSubscriptionsPerPrincipal: null }, ErrorCode.NotPositiveInteger],
      [{ retryAfterSeconds: null }, ErrorCode.NotPositiveInteger],
      [{ completeTimeoutMs: 2 ** 31 }, ErrorCode.DurationTooLong],
      [{ overflow: 'drop' }, ErrorCode.RemovedOption],
      [{ maxBuffer: 100 }, ErrorCode.RemovedOption],
      [{ bus: {} }, ErrorCode.InvalidBus],
      [{ bus: null }, ErrorCode.InvalidBus],
      [{ logger: { warn() {} } }, ErrorCode.InvalidLogger],
    ];
    for (const [options, code] of cases) {
      expect([options, thrown(() => new SubscriptionHub(options as never)).code]).toStrictEqual([options, code]);
    }
  });

  test('a bus that is not one is refused with what a bus is and where to get one', () => {
    expect(thrown(() => new SubscriptionHub({ bus: { join: undefined } } as never)).message).toBe(
      "mcp-subscriptions: Expected `bus` to be a SubscriptionBus (`new MemoryBus()`, a `RedisBus` from 'mcp-subscriptions/redis', or an object whose `join({ event, cancel })` returns a member), got `object` (object)",
    );
  });

  test('the listen options, through the middleware', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ capabilities: {} }, ErrorCode.MissingOption],
      [{ hub: {}, capabilities: {} }, ErrorCode.InvalidHub],
      [{ hub }, ErrorCode.MissingOption],
      [{ ...base, capabilities: { resourceSubscriptions: true } }, ErrorCode.MissingOption],
      [{ ...base, capabilities: { tasks: true } }, ErrorCode.MissingOption],
      [{ ...base, capabilities: 'all' }, ErrorCode.OptionsNotObject],
      [{ ...base, capabilities: { tasks: 'yes' } }, ErrorCode.NotBoolean],
      [{ ...base, canRead: 'yes' }, ErrorCode.NotFunction],
      [{ ...base, principal: 'alice' }, ErrorCode.NotFunction],
      [{ ...base, keepAliveMs: 0 }, ErrorCode.NotPositiveInteger],
      [{ ...base, authorizeTimeoutMs: 2 ** 31 }, ErrorCode.DurationTooLong],
      [{ ...base, maxBodyBytes: -1 }, ErrorCode.NotPositiveInteger],
      [{ ...base, protocolVersions: [] }, ErrorCode.InvalidProtocolVersions],
      [{ ...base, serverInfo: 'notes' }, ErrorCode.InvalidServerInfo],
      [{ ...base, logger: {} }, ErrorCode.InvalidLogger],
      [{ ...base, keepAliveMs: null }, ErrorCode.NotPositiveInteger],
    ];
    for (const [options, code] of cases) {
      const error = optionsErrorOf(() => mcpSubscriptions(options as never));
      expect([Object.keys(options), error.code]).toStrictEqual([Object.keys(options), code]);
    }
  });

  test('docs/error-codes.md lists every code the library has', () => {
    const page = readFileSync(new URL('../../docs/error-codes.md', import.meta.url), 'utf8');
    for (const code of Object.values(ErrorCode)) expect(page).toContain(`\`${code}\``);
    // Every option code is an option code there, and every runtime code a runtime one.
    const [options, runtime] = page.split('## Runtime errors');
    for (const code of OPTION_ERROR_CODES) expect(options).toContain(`\`${code}\``);
    for (const code of Object.values(ErrorCode).filter((c) => !OPTION_ERROR_CODES.includes(c))) {
      expect(runtime).toContain(`\`${code}\``);
    }
  });
});

describe('a hub is known by its brand', () => {
  test('an object with every method of a hub is not one; the message says what to pass', () => {
    const lookalike = Object.fromEntries(
      [
        'toolsListChanged',
        'publish',
        'subscribe',
        'subscribeAll',
        'stats',
        'complete',
        'close',
        'reserve',
        'cancel',
      ].map((name) => [name, () => undefined]),
    );
    expect(optionMessage(() => mcpSubscriptions({ ...base, hub: lookalike as never }), ErrorCode.InvalidHub)).toBe(
      "mcp-subscriptions: Expected `hub` of mcpSubscriptions() to be the hub your services publish to, made with `new SubscriptionHub()` imported from 'mcp-subscriptions' (not an object shaped like one), got `object` (object)",
    );
    expect(optionMessage(() => mcpSubscriptions({ capabilities: {} } as never), ErrorCode.MissingOption)).toMatch(
      /^mcp-subscriptions: Expected `hub` of mcpSubscriptions\(\) to be the hub your services publish to, made with `new SubscriptionHub\(\)` .* got `undefined` \(undefined\)$/,
    );
  });

  test('a hub made by another copy of the package is a hub, and serves streams', async () => {
    // Two copies of the package in one app (a monorepo, a library that bundles its own): the brand
    // is a registered symbol, so both still agree; `instanceof` or a module-private symbol would not.
    const copy = mkdtempSync(path.join(tmpdir(), 'mcp-subscriptions-copy-'));
    try {
      cpSync(new URL('../../lib', import.meta.url), path.join(copy, 'lib'), { recursive: true });
      const other = (await import(pathToFileURL(path.join(copy, 'lib', 'index.ts')).href)) as {
        SubscriptionHub: typeof SubscriptionHub;
      };
      expect(other.SubscriptionHub).not.toBe(SubscriptionHub);
      const foreign = new other.SubscriptionHub({ logger });
      const handler = createListenHandler({ hub: foreign, capabilities: { toolsListChanged: true } });
      const res = new FakeResponse();
      await handler.handle(
        {
          body: listenBody('copy', { toolsListChanged: true }),
          headers: listenHeaders(),
          principal: 'alice',
          request: undefined,
        },
        res,
      );
      expect(foreign.stats().openStreams).toBe(1);
      await foreign.close();
      expect(res.text).toContain('"resultType":"complete"');
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});

describe('every error is in the McpSubscriptionsError hierarchy', () => {
  test('CheckTimeoutError has its code and its class', () => {
    const error = new CheckTimeoutError(5000);
    expect(error).toBeInstanceOf(McpSubscriptionsError);
    expect(error.name).toBe('CheckTimeoutError');
    expect(error.code).toBe(ErrorCode.CheckTimeout);
    expect(hasErrorCode(error, 'ERR_MCP_SUBSCRIPTIONS_CHECK_TIMEOUT')).toBe(true);
  });

  test('a reservation opened twice is an internal error with its code', async () => {
    const own = new SubscriptionHub({ logger: recordingLogger() });
    const reservation = hubEngine(own).reserve('alice', 'x');
    const init = {
      id: 'x',
      filter: { toolsListChanged: true as const },
      keepAliveMs: false as const,
      ackFrame: 'event: message\ndata: {}\n\n',
      resultFrame: () => 'event: message\ndata: {}\n\n',
    };
    reservation.open(new FakeResponse(), init);
    const error = thrown(() => reservation.open(new FakeResponse(), init));
    expect(error).toBeInstanceOf(McpSubscriptionsError);
    expect(error.code).toBe(ErrorCode.Internal);
    openStream(own, new FakeResponse(), { id: 'y' });
    await own.close();
  });

  test('errors the engine raises on bad events carry their code', () => {
    const error = thrown(() => hub.resourceUpdated('relative'));
    expect(error).toBeInstanceOf(McpSubscriptionsError);
    expect(error.code).toBe(ErrorCode.InvalidEvent);
  });
});
