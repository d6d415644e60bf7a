/**
 * The NestJS module's wiring, with `Test.createTestingModule`: `forRoot()` and the three
 * `forRootAsync()` forms, the hub injectable by its class anywhere (one instance), options validated
 * at start-up with the engine's messages, hooks resolved from providers, and shutdown closing the hub.
 */
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Inject, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ErrorCode, SubscriptionHub } from 'mcp-subscriptions';
import {
  McpSubscriptionsModule,
  McpSubscriptionsService,
  SubscriptionHub as ReexportedHub,
  type McpSubscriptionsModuleAsyncOptions,
  type McpSubscriptionsModuleOptions,
  type McpSubscriptionsOptions,
  type McpSubscriptionsOptionsFactory,
} from 'mcp-subscriptions/nest';
import { expectOptionsError } from './helpers/options.ts';

const CAPABILITIES = { toolsListChanged: true, resourceSubscriptions: true } as const;

@Injectable()
class NotesService {
  constructor(@Inject(SubscriptionHub) readonly hub: SubscriptionHub) {}
}

@Module({ providers: [NotesService], exports: [NotesService] })
class NotesModule {}

@Injectable()
class TasksService {
  constructor(@Inject(SubscriptionHub) readonly hub: SubscriptionHub) {}
}

@Module({ providers: [TasksService], exports: [TasksService] })
class TasksModule {}

const SETTINGS = Symbol('SETTINGS');

@Module({ providers: [{ provide: SETTINGS, useValue: { maxBuffer: 7 } }], exports: [SETTINGS] })
class SettingsModule {}

@Injectable()
class OptionsFromClass implements McpSubscriptionsOptionsFactory {
  createMcpSubscriptionsOptions(): McpSubscriptionsOptions {
    return { capabilities: CAPABILITIES, hub: { maxBuffer: 11 } };
  }
}

async function compile(subscriptions: ReturnType<typeof McpSubscriptionsModule.forRoot>, ...imports: unknown[]) {
  return Test.createTestingModule({ imports: [subscriptions, NotesModule, TasksModule, ...(imports as [])] }).compile();
}

/** Asserts that `promise` (or `fn`) fails with the engine's OptionsError and a message matching `message`. */
async function rejectsWithOption(action: (() => unknown) | Promise<unknown>, message: RegExp): Promise<void> {
  const run = typeof action === 'function' ? Promise.resolve().then(action) : action;
  const error: unknown = await run.then(
    () => {
      throw new Error('Missing expected rejection.');
    },
    (rejection: unknown) => rejection,
  );
  // An OptionsError with one of the option codes and the package's prefix; a failure shows the error received.
  expectOptionsError(error);
  expect((error as Error).message).toMatch(message);
}

describe('NestJS module wiring', () => {
  it('forRoot(): one hub, injectable by its class in every host module, built from the hub options', async () => {
    const moduleRef = await compile(
      McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, hub: { maxBuffer: 5 } }),
    );
    const hub = moduleRef.get(SubscriptionHub);
    expect(moduleRef.get(NotesService).hub).toBe(hub);
    expect(moduleRef.get(TasksService).hub).toBe(hub);
    expect(moduleRef.get(McpSubscriptionsService).hub).toBe(hub);
    // mcp-subscriptions/nest re-exports the engine class itself.
    expect(ReexportedHub).toBe(SubscriptionHub);
    expect(hub.options.maxBuffer).toBe(5);
    await moduleRef.close();
  });

  it('forRoot() with a hub instance provides that very hub', async () => {
    const given = new SubscriptionHub();
    const moduleRef = await compile(McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, hub: given }));
    expect(moduleRef.get(NotesService).hub).toBe(given);
    await moduleRef.close();
  });

  const asyncForms: [string, McpSubscriptionsModuleAsyncOptions, number][] = [
    [
      'useFactory with imports and inject',
      {
        imports: [SettingsModule],
        inject: [SETTINGS],
        useFactory: (settings: { maxBuffer: number }) => ({ capabilities: CAPABILITIES, hub: settings }),
      },
      7,
    ],
    [
      'an async useFactory',
      { useFactory: () => Promise.resolve({ capabilities: CAPABILITIES, hub: { maxBuffer: 9 } }) },
      9,
    ],
    ['useClass', { useClass: OptionsFromClass }, 11],
    ['useExisting', { imports: [OptionsModule()], useExisting: OptionsFromClass }, 11],
  ];
  for (const [name, options, maxBuffer] of asyncForms) {
    it(`forRootAsync() with ${name}`, async () => {
      const moduleRef = await compile(McpSubscriptionsModule.forRootAsync(options));
      const hub = moduleRef.get(SubscriptionHub);
      expect(hub.options.maxBuffer).toBe(maxBuffer);
      expect(moduleRef.get(NotesService).hub).toBe(hub);
      await moduleRef.close();
    });
  }

  it('isGlobal: false keeps the hub inside the importing module', async () => {
    await expect(
      compile(McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, isGlobal: false })),
    ).rejects.toThrow(/SubscriptionHub/);
  });

  it('shutdown closes the hub: open streams end, new ones are refused', async () => {
    const moduleRef = await compile(McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES }));
    const hub = moduleRef.get(SubscriptionHub);
    await moduleRef.close();
    expect(() => hub.reserve('alice')).toThrow(expect.objectContaining({ code: ErrorCode.Protocol }));
  });
});

function OptionsModule() {
  @Module({ providers: [OptionsFromClass], exports: [OptionsFromClass] })
  class ProvidesOptions {}
  return ProvidesOptions;
}

describe('NestJS module options are validated at start-up, in the engine’s words', () => {
  const base: McpSubscriptionsModuleOptions = { capabilities: CAPABILITIES };
  const atDefinition: [string, () => unknown, RegExp][] = [
    [
      'an empty path',
      () => McpSubscriptionsModule.forRoot({ ...base, path: '' }),
      /Expected `path` to be a non-empty string/,
    ],
    [
      'guards that are not an array',
      () => McpSubscriptionsModule.forRoot({ ...base, guards: 'auth' as never }),
      /Expected `guards` to be an array of guards, got `auth` \(string\)/,
    ],
    [
      'a guard that is neither a class nor a guard',
      () => McpSubscriptionsModule.forRoot({ ...base, guards: [42 as never] }),
      /Expected `guards\[0\]` to be a guard class or an object with `canActivate\(\)`, got `42` \(number\)/,
    ],
    [
      'forRootAsync() without a source',
      () => McpSubscriptionsModule.forRootAsync({}),
      /Expected exactly one of `useFactory`, `useClass` or `useExisting` in forRootAsync\(\), got none/,
    ],
    [
      'forRootAsync() with two sources',
      () => McpSubscriptionsModule.forRootAsync({ useFactory: () => base, useClass: OptionsFromClass }),
      /got `useFactory` and `useClass`/,
    ],
  ];
  for (const [name, define, message] of atDefinition) {
    it(`${name}: throws when the module is defined`, async () => {
      await rejectsWithOption(define, message);
    });
  }

  const atStart: [string, McpSubscriptionsModuleOptions, RegExp][] = [
    [
      'a negative maxBuffer (the hub’s validator)',
      { ...base, hub: { maxBuffer: -5 } },
      /^mcp-subscriptions: Expected `maxBuffer` to be a positive integer, got `-5` \(number\)$/,
    ],
    [
      'an unknown capability',
      { capabilities: { toolsListChange: true } as never },
      /Unknown capability `toolsListChange`/,
    ],
    [
      'tasks without canAccessTask (the engine’s validator)',
      { capabilities: { tasks: true } },
      /Expected `canAccessTask` \(does the caller own this task\?\) since `capabilities.tasks` is on/,
    ],
    ['a zero keepAliveMs', { ...base, keepAliveMs: 0 }, /Expected `keepAliveMs` to be a positive integer, got `0`/],
    [
      'a principal that is not a function',
      { ...base, principal: 'sub' as never },
      /Expected `principal` to be a function/,
    ],
    [
      'a hook that is neither function nor token',
      { ...base, canRead: 42 as never },
      /Expected `canRead` to be a function or the injection token/,
    ],
    [
      'a hub that is neither hub nor options',
      { ...base, hub: 'redis' as never },
      /Expected `hub` to be a SubscriptionHub or its options/,
    ],
  ];
  for (const [name, options, message] of atStart) {
    it(`${name}: the app fails to start`, async () => {
      await rejectsWithOption(compile(McpSubscriptionsModule.forRoot(options)), message);
    });
  }

  it('an async factory’s options are validated the same way', async () => {
    await rejectsWithOption(
      compile(McpSubscriptionsModule.forRootAsync({ useFactory: () => ({ ...base, hub: { maxSubscriptions: 0 } }) })),
      /Expected `maxSubscriptions` to be a positive integer, got `0` \(number\)/,
    );
  });

  it('a hook provider that is not registered is named when the app initializes', async () => {
    @Injectable()
    class MissingHook {
      handleSubscribeResource(): boolean {
        return true;
      }
    }
    const moduleRef = await compile(McpSubscriptionsModule.forRoot({ ...base, handleSubscribeResource: MissingHook }));
    await rejectsWithOption(
      moduleRef.init(),
      /Expected a provider for `MissingHook` \(given as `handleSubscribeResource`\) to be registered/,
    );
  });

  it('a hook token whose provider lacks the method is named', async () => {
    const HOOK = Symbol('HOOK');
    @Module({ providers: [{ provide: HOOK, useValue: { check: () => true } }], exports: [HOOK] })
    class HookModule {}
    const moduleRef = await compile(McpSubscriptionsModule.forRoot({ ...base, canRead: HOOK }), HookModule);
    await rejectsWithOption(
      moduleRef.init(),
      /Expected the provider `Symbol\(HOOK\)` given as `canRead` to have a `canRead\(\)` method/,
    );
  });
});
