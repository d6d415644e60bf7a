/**
 * The NestJS module's wiring, with `Test.createTestingModule`: the module as Nest's
 * `ConfigurableModuleBuilder` defines it, `forRoot()` and the three `forRootAsync()` forms, the extras
 * that shape it (`path`, `guards`, `isGlobal`), the hub injectable by its class anywhere (one
 * instance), options validated with the engine's messages and a code per check (at `forRoot()` when
 * known up front, at start-up when a factory returns them), unknown keys refused with a suggestion,
 * hooks resolved from providers, and shutdown closing the hub.
 */
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Inject, Injectable, Module, type CanActivate, type DynamicModule, type Type } from '@nestjs/common';
import { GUARDS_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { Test } from '@nestjs/testing';
import { ErrorCode, SubscriptionHub, type ErrorCodeValue } from 'mcp-subscriptions';
import {
  MCP_SUBSCRIPTIONS_OPTIONS,
  McpSubscriptionsModule,
  McpSubscriptionsService,
  SubscriptionHub as ReexportedHub,
  type McpSubscriptionsModuleAsyncOptions,
  type McpSubscriptionsModuleOptions,
  type McpSubscriptionsOptions,
  type McpSubscriptionsOptionsFactory,
} from 'mcp-subscriptions/nest';
import { hubEngine } from '../../lib/internal.ts';
import { expectOptionsError, optionsErrorOf } from '../helpers/options.ts';

// List changes only: the wiring does not depend on resource subscriptions, which need a read check
// (a guard or `canRead`: see 'fails closed' below).
const CAPABILITIES = { toolsListChanged: true } as const;

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

@Module({ providers: [{ provide: SETTINGS, useValue: { maxSubscriptions: 7 } }], exports: [SETTINGS] })
class SettingsModule {}

@Injectable()
class OptionsFromClass implements McpSubscriptionsOptionsFactory {
  createMcpSubscriptionsOptions(): McpSubscriptionsOptions {
    return { capabilities: CAPABILITIES, hub: { maxSubscriptions: 11 } };
  }
}

@Injectable()
class OptionsFromSettings implements McpSubscriptionsOptionsFactory {
  constructor(@Inject(SETTINGS) private readonly settings: { maxSubscriptions: number }) {}

  createMcpSubscriptionsOptions(): McpSubscriptionsOptions {
    return { capabilities: CAPABILITIES, hub: this.settings };
  }
}

const OPTIONS_TOKEN = 'MCP_SUBSCRIPTIONS_OPTIONS_FACTORY';
const MAX_SUBSCRIPTIONS = Symbol('MAX_SUBSCRIPTIONS');

async function compile(subscriptions: ReturnType<typeof McpSubscriptionsModule.forRoot>, ...imports: unknown[]) {
  return Test.createTestingModule({ imports: [subscriptions, NotesModule, TasksModule, ...(imports as [])] }).compile();
}

/**
 * Asserts that `promise` (or `fn`) fails with the engine's OptionsError and a message matching
 * `message` and, when given, the code of the check that failed.
 */
async function rejectsWithOption(
  action: (() => unknown) | Promise<unknown>,
  message: RegExp,
  code?: ErrorCodeValue,
): Promise<void> {
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
  if (code !== undefined) expect((error as { code: unknown }).code).toBe(code);
}

/** Asserts that `define` throws the OptionsError at once (synchronously, when the module is defined). */
function throwsWithOption(define: () => unknown, message: RegExp, code: ErrorCodeValue): void {
  const error = optionsErrorOf(define);
  expect(error.message).toMatch(message);
  expect(error.code).toBe(code);
}

describe('NestJS module wiring', () => {
  it('forRoot(): one hub, injectable by its class in every host module, built from the hub options', async () => {
    const moduleRef = await compile(
      McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, hub: { maxSubscriptions: 5 } }),
    );
    const hub = moduleRef.get(SubscriptionHub);
    expect(moduleRef.get(NotesService).hub).toBe(hub);
    expect(moduleRef.get(TasksService).hub).toBe(hub);
    expect(moduleRef.get(McpSubscriptionsService).hub).toBe(hub);
    // mcp-subscriptions/nest re-exports the engine class itself.
    expect(ReexportedHub).toBe(SubscriptionHub);
    expect(hub.options.maxSubscriptions).toBe(5);
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
        useFactory: (settings: { maxSubscriptions: number }) => ({ capabilities: CAPABILITIES, hub: settings }),
      },
      7,
    ],
    [
      'an async useFactory',
      { useFactory: () => Promise.resolve({ capabilities: CAPABILITIES, hub: { maxSubscriptions: 9 } }) },
      9,
    ],
    ['useClass', { useClass: OptionsFromClass }, 11],
    ['useExisting', { imports: [OptionsModule()], useExisting: OptionsFromClass }, 11],
    ['useExisting with a string token', { imports: [OptionsModule(OPTIONS_TOKEN)], useExisting: OPTIONS_TOKEN }, 11],
    [
      'useFactory with provideInjectionTokensFrom (the builder copies what inject names)',
      {
        inject: [SETTINGS],
        provideInjectionTokensFrom: [
          {
            provide: SETTINGS,
            useFactory: (maxSubscriptions: number) => ({ maxSubscriptions }),
            inject: [MAX_SUBSCRIPTIONS],
          },
          { provide: MAX_SUBSCRIPTIONS, useValue: 3 },
        ],
        useFactory: (settings: { maxSubscriptions: number }) => ({ capabilities: CAPABILITIES, hub: settings }),
      },
      3,
    ],
    [
      'useClass whose dependency comes from extraProviders',
      { useClass: OptionsFromSettings, extraProviders: [{ provide: SETTINGS, useValue: { maxSubscriptions: 13 } }] },
      13,
    ],
  ];
  for (const [name, options, maxSubscriptions] of asyncForms) {
    it(`forRootAsync() with ${name}`, async () => {
      const moduleRef = await compile(McpSubscriptionsModule.forRootAsync(options));
      const hub = moduleRef.get(SubscriptionHub);
      expect(hub.options.maxSubscriptions).toBe(maxSubscriptions);
      expect(moduleRef.get(NotesService).hub).toBe(hub);
      // The source's options are the builder's options provider, and what the engine runs with.
      expect(moduleRef.get(MCP_SUBSCRIPTIONS_OPTIONS)).toMatchObject({ capabilities: CAPABILITIES });
      expect(moduleRef.get(McpSubscriptionsService).handler.options.capabilities).toMatchObject(CAPABILITIES);
      await moduleRef.close();
    });
  }

  it('is defined by ConfigurableModuleBuilder: forRoot() provides its options, without the extras, under MCP_SUBSCRIPTIONS_OPTIONS', async () => {
    // The static methods are inherited from the class the builder made (setClassMethodName('forRoot')).
    const builderClass = Object.getPrototypeOf(McpSubscriptionsModule) as Record<string, unknown>;
    expect(typeof builderClass['forRoot']).toBe('function');
    expect(typeof builderClass['forRootAsync']).toBe('function');
    const options = { capabilities: CAPABILITIES, keepAliveMs: 1234, path: '/rpc', guards: [], isGlobal: true };
    const definition = McpSubscriptionsModule.forRoot(options);
    expect(definition.module).toBe(McpSubscriptionsModule);
    expect(definition.providers).toContainEqual({
      provide: MCP_SUBSCRIPTIONS_OPTIONS,
      useValue: { capabilities: CAPABILITIES, keepAliveMs: 1234 },
    });
    expect(definition.exports).toStrictEqual([SubscriptionHub, McpSubscriptionsService]);
    const moduleRef = await compile(definition);
    expect(moduleRef.get(MCP_SUBSCRIPTIONS_OPTIONS)).toStrictEqual({ capabilities: CAPABILITIES, keepAliveMs: 1234 });
    expect(moduleRef.get(McpSubscriptionsService).handler.options.keepAliveMs).toBe(1234);
    // forRoot() never mutates what it is given.
    expect(options).toStrictEqual({
      capabilities: CAPABILITIES,
      keepAliveMs: 1234,
      path: '/rpc',
      guards: [],
      isGlobal: true,
    });
    await moduleRef.close();
  });

  it('forRootAsync() is the builder’s: its imports, and the useClass registered as a provider', () => {
    const definition = McpSubscriptionsModule.forRootAsync({ imports: [SettingsModule], useClass: OptionsFromClass });
    expect(definition.module).toBe(McpSubscriptionsModule);
    expect(definition.imports).toStrictEqual([SettingsModule]);
    expect(definition.providers).toContainEqual({ provide: OptionsFromClass, useClass: OptionsFromClass });
    expect(definition.providers).toContainEqual(
      expect.objectContaining({ provide: MCP_SUBSCRIPTIONS_OPTIONS, inject: [OptionsFromClass] }),
    );
  });

  const byForm: [string, (isGlobal?: boolean) => DynamicModule][] = [
    [
      'forRoot()',
      (isGlobal) =>
        McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, ...(isGlobal === undefined ? {} : { isGlobal }) }),
    ],
    [
      'forRootAsync()',
      (isGlobal) =>
        McpSubscriptionsModule.forRootAsync({
          ...(isGlobal === undefined ? {} : { isGlobal }),
          useFactory: () => ({ capabilities: CAPABILITIES }),
        }),
    ],
  ];
  for (const [form, define] of byForm) {
    it(`${form}: global by default and with isGlobal: true, scoped to the importer with isGlobal: false`, async () => {
      expect(define().global).toBe(true);
      expect(define(true).global).toBe(true);
      expect(define(false).global).toBe(false);
      const global = await compile(define(true));
      expect(global.get(NotesService).hub).toBe(global.get(SubscriptionHub));
      await global.close();
      // NotesService's module does not import the module: without `global` it cannot inject the hub.
      await expect(compile(define(false))).rejects.toThrow(/SubscriptionHub/);
    });
  }

  it('path and guards shape the listen route and the read context, in forRoot() and forRootAsync() alike', () => {
    class RouteGuard implements CanActivate {
      canActivate(): boolean {
        return true;
      }
    }
    const instance: CanActivate = { canActivate: () => true };
    const definitions = [
      McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, path: '/rpc', guards: [RouteGuard, instance] }),
      McpSubscriptionsModule.forRootAsync({
        path: '/rpc',
        guards: [RouteGuard, instance],
        useFactory: () => ({ capabilities: CAPABILITIES }),
      }),
    ];
    for (const definition of definitions) {
      const controller = listenControllerOf(definition);
      expect(Reflect.getMetadata(PATH_METADATA, controller)).toBe('/rpc');
      expect(Reflect.getMetadata(GUARDS_METADATA, controller)).toStrictEqual([RouteGuard, instance]);
      expect(Reflect.getMetadata(GUARDS_METADATA, readContextOf(definition))).toStrictEqual([RouteGuard, instance]);
    }
    // The defaults: '/mcp', and no guards beyond the global ones.
    const defaults = McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES });
    const controller = listenControllerOf(defaults);
    expect(Reflect.getMetadata(PATH_METADATA, controller)).toBe('/mcp');
    expect(Reflect.getMetadata(GUARDS_METADATA, controller) ?? []).toStrictEqual([]);
    expect(Reflect.getMetadata(GUARDS_METADATA, readContextOf(defaults)) ?? []).toStrictEqual([]);
  });

  it('isGlobal: false keeps the hub inside the importing module', async () => {
    await expect(
      compile(McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, isGlobal: false })),
    ).rejects.toThrow(/SubscriptionHub/);
  });

  it('shutdown closes the hub the module built: open streams end, new ones are refused', async () => {
    const moduleRef = await compile(McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES }));
    const hub = moduleRef.get(SubscriptionHub);
    await moduleRef.close();
    expect(() => hubEngine(hub).reserve('alice')).toThrow(expect.objectContaining({ code: ErrorCode.Protocol }));
  });

  it('shutdown leaves a hub the caller passed in open: it is theirs to close', async () => {
    for (const define of [
      (hub: SubscriptionHub) => McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, hub }),
      (hub: SubscriptionHub) =>
        McpSubscriptionsModule.forRootAsync({ useFactory: () => ({ capabilities: CAPABILITIES, hub }) }),
    ]) {
      const given = new SubscriptionHub();
      const moduleRef = await compile(define(given));
      await moduleRef.close();
      // Still open: a stream can be reserved, and the caller closes it when done.
      hubEngine(given).reserve('alice').release();
      await given.close();
      expect(() => hubEngine(given).reserve('alice')).toThrow(expect.objectContaining({ code: ErrorCode.Protocol }));
    }
  });
});

/** A module providing `OptionsFromClass`, by its class or under `token`. */
function OptionsModule(token?: string) {
  const provider = token === undefined ? OptionsFromClass : { provide: token, useClass: OptionsFromClass };
  @Module({ providers: [provider], exports: [token ?? OptionsFromClass] })
  class ProvidesOptions {}
  return ProvidesOptions;
}

/** The listen route's controller, which the module made for this definition. */
function listenControllerOf(definition: DynamicModule): Type<unknown> {
  expect(definition.controllers).toHaveLength(1);
  return (definition.controllers as Type<unknown>[])[0]!;
}

/** The class the module made for the guards to see per URI (its only class provider besides the service). */
function readContextOf(definition: DynamicModule): Type<unknown> {
  const found = (definition.providers ?? []).find(
    (provider): provider is Type<unknown> =>
      typeof provider === 'function' && provider.name === 'McpSubscriptionsReadContext',
  );
  if (found === undefined) throw new Error('no read context among the providers');
  return found;
}

describe('NestJS module: fails closed without a read check', () => {
  const RESOURCES = { resourceSubscriptions: true } as const;
  const NO_READ_CHECK =
    /Expected `canRead` or read `guards` in McpSubscriptionsModule\.forRoot\(\), since `capabilities\.resourceSubscriptions` is on: .*every URI would be admitted\. .*`guards`, give `canRead`, or set `readGuards: 'route-and-global'`/;

  class ReadGuard implements CanActivate {
    canActivate(): boolean {
      return true;
    }
  }

  it('forRoot() with resource subscriptions and neither canRead nor guards throws, naming what to set', () => {
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ capabilities: RESOURCES }),
      NO_READ_CHECK,
      ErrorCode.NoReadCheck,
    );
    // An empty `guards` decides nothing either.
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ capabilities: RESOURCES, guards: [], readGuards: 'route' }),
      NO_READ_CHECK,
      ErrorCode.NoReadCheck,
    );
  });

  it('a factory returning resource subscriptions, with neither canRead nor guards: the app fails to start', async () => {
    await rejectsWithOption(
      compile(McpSubscriptionsModule.forRootAsync({ useFactory: () => ({ capabilities: RESOURCES }) })),
      /Expected `canRead` or read `guards` in the options returned by the useFactory of McpSubscriptionsModule\.forRootAsync\(\)/,
      ErrorCode.NoReadCheck,
    );
  });

  it('a read guard, canRead, or global guards opted in to deciding reads each lets it start', async () => {
    const definitions = [
      McpSubscriptionsModule.forRoot({ capabilities: RESOURCES, guards: [ReadGuard] }),
      McpSubscriptionsModule.forRoot({ capabilities: RESOURCES, canRead: () => true }),
      McpSubscriptionsModule.forRoot({ capabilities: RESOURCES, readGuards: 'route-and-global' }),
      McpSubscriptionsModule.forRootAsync({ guards: [ReadGuard], useFactory: () => ({ capabilities: RESOURCES }) }),
      McpSubscriptionsModule.forRootAsync({
        readGuards: 'route-and-global',
        useFactory: () => ({ capabilities: RESOURCES }),
      }),
      McpSubscriptionsModule.forRootAsync({ useFactory: () => ({ capabilities: RESOURCES, canRead: () => true }) }),
      // Without resource subscriptions there is nothing to read.
      McpSubscriptionsModule.forRoot({ capabilities: { toolsListChanged: true } }),
    ];
    for (const definition of definitions) await (await compile(definition)).close();
  });

  it('readGuards takes only its two values', () => {
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, readGuards: 'global' as never }),
      /Expected `readGuards` to be one of 'route', 'route-and-global', got `global` \(string\)/,
      ErrorCode.NotOneOf,
    );
    throwsWithOption(
      () =>
        McpSubscriptionsModule.forRootAsync({
          readGuards: true as never,
          useFactory: () => ({ capabilities: CAPABILITIES }),
        }),
      /Expected `readGuards` to be one of/,
      ErrorCode.NotOneOf,
    );
  });
});

describe('NestJS module options are validated in the engine’s words, with a code per check', () => {
  const base: McpSubscriptionsModuleOptions = { capabilities: CAPABILITIES };
  const atDefinition: [string, () => unknown, RegExp, ErrorCodeValue][] = [
    [
      'an empty path',
      () => McpSubscriptionsModule.forRoot({ ...base, path: '' }),
      /Expected `path` to be a non-empty string/,
      ErrorCode.InvalidPath,
    ],
    [
      'guards that are not an array',
      () => McpSubscriptionsModule.forRoot({ ...base, guards: 'auth' as never }),
      /Expected `guards` to be an array of guards, got `auth` \(string\)/,
      ErrorCode.InvalidGuard,
    ],
    [
      'a guard that is neither a class nor a guard',
      () => McpSubscriptionsModule.forRoot({ ...base, guards: [42 as never] }),
      /Expected `guards\[0\]` to be a guard class or an object with `canActivate\(\)`, got `42` \(number\)/,
      ErrorCode.InvalidGuard,
    ],
    [
      'forRootAsync() without a source',
      () => McpSubscriptionsModule.forRootAsync({}),
      /Expected exactly one of `useFactory`, `useClass` or `useExisting` in forRootAsync\(\), got none/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'forRootAsync() with two sources',
      () => McpSubscriptionsModule.forRootAsync({ useFactory: () => base, useClass: OptionsFromClass }),
      /got `useFactory` and `useClass`/,
      ErrorCode.InvalidAsyncOptions,
    ],
  ];
  for (const [name, define, message, code] of atDefinition) {
    it(`${name}: throws when the module is defined`, async () => {
      await rejectsWithOption(define, message, code);
      throwsWithOption(define, message, code);
    });
  }

  // Known up front, these fail at forRoot(); returned by a factory, the app fails to start.
  const atStart: [string, McpSubscriptionsModuleOptions, RegExp, ErrorCodeValue][] = [
    [
      'a negative maxSubscriptions (the hub’s validator)',
      { ...base, hub: { maxSubscriptions: -5 } },
      /^mcp-subscriptions: Expected `maxSubscriptions` to be a positive integer, got `-5` \(number\)$/,
      ErrorCode.NotPositiveInteger,
    ],
    [
      'an unknown capability',
      { capabilities: { toolsListChange: true } as never },
      /Unknown capability `toolsListChange`/,
      ErrorCode.UnknownOption,
    ],
    [
      'tasks without canAccessTask (the engine’s validator)',
      { capabilities: { tasks: true } },
      /Expected `canAccessTask` \(does the caller own this task\?\) since `capabilities.tasks` is on/,
      ErrorCode.MissingOption,
    ],
    [
      'a zero keepAliveMs',
      { ...base, keepAliveMs: 0 },
      /Expected `keepAliveMs` to be a positive integer, or `false` to turn it off, got `0`/,
      ErrorCode.NotPositiveInteger,
    ],
    [
      'a principal that is not a function',
      { ...base, principal: 'sub' as never },
      /Expected `principal` to be a function/,
      ErrorCode.NotFunction,
    ],
    [
      'a hook that is neither function nor provider',
      { ...base, canRead: 42 as never },
      /Expected `canRead` to be a function or `\{ useExisting: <token> \}` \(a provider with a `canRead\(\)` method\), got `42` \(number\)$/,
      ErrorCode.InvalidHook,
    ],
    [
      'a hub that is neither hub nor options',
      { ...base, hub: 'redis' as never },
      /Expected `hub` of .*McpSubscriptionsModule\.forRoot(Async)?\(\) to be the options of the hub the module builds .*or a hub you made with `new SubscriptionHub\(\)` imported from 'mcp-subscriptions'/,
      ErrorCode.InvalidHub,
    ],
    [
      'a zero maxBodyBytes',
      { ...base, maxBodyBytes: 0 },
      /Expected `maxBodyBytes` to be a positive integer, got `0` \(number\)/,
      ErrorCode.NotPositiveInteger,
    ],
  ];
  for (const [name, options, message, code] of atStart) {
    it(`${name}: forRoot() throws`, () => {
      throwsWithOption(() => McpSubscriptionsModule.forRoot(options), message, code);
    });
    it(`${name}, returned by a factory: the app fails to start`, async () => {
      const definition = McpSubscriptionsModule.forRootAsync({ useFactory: () => options });
      await rejectsWithOption(compile(definition), message, code);
    });
  }

  it('an async factory’s options are validated the same way', async () => {
    await rejectsWithOption(
      compile(McpSubscriptionsModule.forRootAsync({ useFactory: () => ({ ...base, hub: { maxSubscriptions: 0 } }) })),
      /Expected `maxSubscriptions` to be a positive integer, got `0` \(number\)/,
      ErrorCode.NotPositiveInteger,
    );
  });

  it('a hook provider that is not registered is named when the app initializes', async () => {
    @Injectable()
    class MissingHook {
      handleSubscribeResource(): boolean {
        return true;
      }
    }
    const moduleRef = await compile(
      McpSubscriptionsModule.forRoot({ ...base, handleSubscribeResource: { useExisting: MissingHook } }),
    );
    await rejectsWithOption(
      moduleRef.init(),
      /Expected a provider for `MissingHook` \(given as `handleSubscribeResource`\) to be registered/,
      ErrorCode.InvalidHook,
    );
  });

  it('a hook token whose provider lacks the method is named', async () => {
    const HOOK = Symbol('HOOK');
    @Module({ providers: [{ provide: HOOK, useValue: { check: () => true } }], exports: [HOOK] })
    class HookModule {}
    const moduleRef = await compile(
      McpSubscriptionsModule.forRoot({ ...base, canRead: { useExisting: HOOK } }),
      HookModule,
    );
    await rejectsWithOption(
      moduleRef.init(),
      /Expected the provider `Symbol\(HOOK\)` given as `canRead` to have a `canRead\(\)` method/,
      ErrorCode.InvalidHook,
    );
  });

  // Every check of the module's own options, each with its code.
  const nestChecks: [string, () => unknown, RegExp, ErrorCodeValue][] = [
    [
      'forRoot() options that are not an object',
      () => McpSubscriptionsModule.forRoot(null as never),
      /Expected the options of McpSubscriptionsModule\.forRoot\(\) to be an object, got `null` \(null\)/,
      ErrorCode.OptionsNotObject,
    ],
    [
      'forRootAsync() options that are not an object',
      () => McpSubscriptionsModule.forRootAsync(undefined as never),
      /Expected the options of McpSubscriptionsModule\.forRootAsync\(\) to be an object, got `undefined`/,
      ErrorCode.OptionsNotObject,
    ],
    [
      'a path that is not a string, given to forRootAsync()',
      () => McpSubscriptionsModule.forRootAsync({ path: 42 as never, useFactory: () => base }),
      /Expected `path` to be a non-empty string like '\/mcp', got `42` \(number\)/,
      ErrorCode.InvalidPath,
    ],
    [
      'guards that are not an array, given to forRootAsync()',
      () => McpSubscriptionsModule.forRootAsync({ guards: {} as never, useFactory: () => base }),
      /Expected `guards` to be an array of guards, got `object` \(object\)/,
      ErrorCode.InvalidGuard,
    ],
    [
      'an isGlobal that is not a boolean',
      () => McpSubscriptionsModule.forRoot({ ...base, isGlobal: 'yes' as never }),
      /Expected `isGlobal` to be a boolean, got `yes` \(string\)/,
      ErrorCode.NotBoolean,
    ],
    [
      'an isGlobal that is not a boolean, given to forRootAsync()',
      () => McpSubscriptionsModule.forRootAsync({ isGlobal: 1 as never, useFactory: () => base }),
      /Expected `isGlobal` to be a boolean, got `1` \(number\)/,
      ErrorCode.NotBoolean,
    ],
    [
      'a useFactory that is not a function',
      () => McpSubscriptionsModule.forRootAsync({ useFactory: 'config' as never }),
      /Expected `useFactory` to be a function, got `config` \(string\)/,
      ErrorCode.NotFunction,
    ],
    [
      'a useClass that is not a class',
      () => McpSubscriptionsModule.forRootAsync({ useClass: (() => base) as never }),
      /Expected `useClass` to be a class implementing McpSubscriptionsOptionsFactory, got `function`/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'a useClass without the factory method',
      () => McpSubscriptionsModule.forRootAsync({ useClass: OptionsWithBuilderDefaultName as never }),
      /Expected the class `OptionsWithBuilderDefaultName` given as `useClass` to have a `createMcpSubscriptionsOptions\(\)` method/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'a useExisting class without the factory method',
      () => McpSubscriptionsModule.forRootAsync({ useExisting: OptionsWithBuilderDefaultName }),
      /Expected the class `OptionsWithBuilderDefaultName` given as `useExisting` to have a `createMcpSubscriptionsOptions\(\)` method/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'a useExisting that is no token',
      () => McpSubscriptionsModule.forRootAsync({ useExisting: 42 as never }),
      /Expected `useExisting` to be a class implementing McpSubscriptionsOptionsFactory or the token of a provider, got `42`/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'an inject that is not an array',
      () => McpSubscriptionsModule.forRootAsync({ useFactory: () => base, inject: SETTINGS as never }),
      /Expected `inject` of McpSubscriptionsModule\.forRootAsync\(\) to be an array, got `Symbol\(SETTINGS\)` \(symbol\)/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'extraProviders that are not an array',
      () => McpSubscriptionsModule.forRootAsync({ useFactory: () => base, extraProviders: NotesService as never }),
      /Expected `extraProviders` of McpSubscriptionsModule\.forRootAsync\(\) to be an array, got `function`/,
      ErrorCode.InvalidAsyncOptions,
    ],
    [
      'a hub options object with an unknown key',
      () => McpSubscriptionsModule.forRoot({ ...base, hub: { maxSubscription: 5 } as never }),
      /Unknown option `maxSubscription` of `hub` of McpSubscriptionsModule\.forRoot\(\); did you mean `maxSubscriptions`\?/,
      ErrorCode.UnknownOption,
    ],
    [
      'an object shaped like a hub, that is not one',
      () =>
        McpSubscriptionsModule.forRoot({
          ...base,
          hub: { publish: () => undefined, subscribe: () => undefined, close: () => undefined } as never,
        }),
      /Expected `hub` of McpSubscriptionsModule\.forRoot\(\) to be the options of the hub the module builds \(e\.g\. `\{ maxSubscriptions: 500 \}`; leave `hub` out for the defaults\), or a hub you made with `new SubscriptionHub\(\)` imported from 'mcp-subscriptions', got `object` \(object\)$/,
      ErrorCode.InvalidHub,
    ],
    [
      'a hub that is an array',
      () => McpSubscriptionsModule.forRoot({ ...base, hub: [] as never }),
      /Expected `hub` of McpSubscriptionsModule\.forRoot\(\) to be the options of the hub .*, got `array` \(object\)$/,
      ErrorCode.InvalidHub,
    ],
  ];
  for (const [name, define, message, code] of nestChecks) {
    it(`${name}: throws ${code} when the module is defined`, () => {
      throwsWithOption(define, message, code);
    });
  }

  it('a factory that returns no object: the app fails to start', async () => {
    await rejectsWithOption(
      compile(McpSubscriptionsModule.forRootAsync({ useFactory: () => undefined as never })),
      /Expected the options returned by the useFactory of McpSubscriptionsModule\.forRootAsync\(\) to be an object, got `undefined`/,
      ErrorCode.OptionsNotObject,
    );
  });
});

/** Implements the builder's default factory method name, not the module's. */
class OptionsWithBuilderDefaultName {
  create(): McpSubscriptionsOptions {
    return { capabilities: CAPABILITIES };
  }
}

describe('NestJS module: unknown keys are refused with a suggestion', () => {
  const base: McpSubscriptionsModuleOptions = { capabilities: CAPABILITIES };
  const atForRoot: [string, Record<string, unknown>, RegExp][] = [
    [
      'a typo of an extra',
      { ...base, guard: [] },
      /^mcp-subscriptions: Unknown option `guard` of McpSubscriptionsModule\.forRoot\(\); did you mean `guards`\?$/,
    ],
    [
      'a typo of a listen option',
      { ...base, keepAliveMS: 1000 },
      /Unknown option `keepAliveMS` of McpSubscriptionsModule\.forRoot\(\); did you mean `keepAliveMs`\?/,
    ],
    [
      'a hub option at the top level',
      { ...base, retryAfterSeconds: 5 },
      /Unknown option `retryAfterSeconds` of McpSubscriptionsModule\.forRoot\(\); it is an option of the hub, which the module builds: give it as `hub: \{ retryAfterSeconds: … \}`/,
    ],
    [
      'a typo of a hub option at the top level',
      { ...base, retryAfterSecond: 5 },
      /Unknown option `retryAfterSecond` of McpSubscriptionsModule\.forRoot\(\); did you mean `retryAfterSeconds`\? it is an option of the hub, which the module builds: give it as `hub: \{ retryAfterSeconds: … \}`/,
    ],
    [
      'an option of forRootAsync()',
      { ...base, useFactory: () => base },
      /Unknown option `useFactory` of McpSubscriptionsModule\.forRoot\(\); it is an option of McpSubscriptionsModule\.forRootAsync\(\)/,
    ],
    [
      'a key near nothing',
      { ...base, colour: 'blue' },
      /Unknown option `colour` of McpSubscriptionsModule\.forRoot\(\); expected one of `hub`, .*`path`, `guards`, `readGuards`, `isGlobal`/,
    ],
  ];
  for (const [name, options, message] of atForRoot) {
    it(`forRoot(): ${name}`, () => {
      throwsWithOption(() => McpSubscriptionsModule.forRoot(options as never), message, ErrorCode.UnknownOption);
    });
  }

  const atForRootAsync: [string, Record<string, unknown>, RegExp][] = [
    [
      'a typo of an extra',
      { useFactory: () => base, guard: [] },
      /Unknown option `guard` of McpSubscriptionsModule\.forRootAsync\(\); did you mean `guards`\?/,
    ],
    [
      'a typo of a source',
      { useFactroy: () => base },
      /Unknown option `useFactroy` of McpSubscriptionsModule\.forRootAsync\(\); did you mean `useFactory`\?/,
    ],
    [
      'an option the factory returns',
      { useFactory: () => base, capabilities: CAPABILITIES },
      /Unknown option `capabilities` of McpSubscriptionsModule\.forRootAsync\(\); it is one of the options the factory returns/,
    ],
    [
      'a hub option',
      { useFactory: () => base, retryAfterSeconds: 5 },
      /Unknown option `retryAfterSeconds` of McpSubscriptionsModule\.forRootAsync\(\); it is an option of the hub, which the module builds: give it as `hub: \{ retryAfterSeconds: … \}`/,
    ],
  ];
  for (const [name, options, message] of atForRootAsync) {
    it(`forRootAsync(): ${name}`, () => {
      throwsWithOption(() => McpSubscriptionsModule.forRootAsync(options), message, ErrorCode.UnknownOption);
    });
  }

  const removed: [string, () => unknown, RegExp][] = [
    [
      'the removed maxBuffer under `hub`',
      () => McpSubscriptionsModule.forRoot({ ...base, hub: { maxBuffer: 5 } as never }),
      /^mcp-subscriptions: Option `maxBuffer` of `hub` of McpSubscriptionsModule\.forRoot\(\) was removed: a stream's queue holds one entry per key its filter follows/,
    ],
    [
      'the removed overflow at the top level of forRoot()',
      () => McpSubscriptionsModule.forRoot({ ...base, overflow: 'close' } as never),
      /^mcp-subscriptions: Option `overflow` of McpSubscriptionsModule\.forRoot\(\) was removed: .*`stallTimeoutMs`/,
    ],
    [
      'the removed maxBuffer given to forRootAsync() itself',
      () => McpSubscriptionsModule.forRootAsync({ useFactory: () => base, maxBuffer: 5 } as never),
      /^mcp-subscriptions: Option `maxBuffer` of McpSubscriptionsModule\.forRootAsync\(\) was removed/,
    ],
  ];
  for (const [name, define, message] of removed) {
    it(`${name}: refused with what replaced it`, () => {
      throwsWithOption(define, message, ErrorCode.RemovedOption);
    });
  }

  it('the removed overflow under `hub`, returned by a factory: the app fails to start with what replaced it', async () => {
    const definition = McpSubscriptionsModule.forRootAsync({
      useFactory: () => ({ ...base, hub: { overflow: 'drop-oldest' } as never }),
    });
    await expect(compile(definition)).rejects.toMatchObject({
      code: ErrorCode.RemovedOption,
      message: expect.stringMatching(
        /Option `overflow` of `hub` of the options returned by the useFactory of McpSubscriptionsModule\.forRootAsync\(\) was removed/,
      ),
    });
  });

  @Injectable()
  class OptionsWithTypo implements McpSubscriptionsOptionsFactory {
    createMcpSubscriptionsOptions(): McpSubscriptionsOptions {
      return { capabilities: CAPABILITIES, guard: [] } as McpSubscriptionsOptions;
    }
  }

  const fromFactory: [string, McpSubscriptionsModuleAsyncOptions, RegExp][] = [
    [
      'an extra returned by useFactory',
      { useFactory: () => ({ ...base, guards: [] }) },
      /^mcp-subscriptions: Unknown option `guards` of the options returned by the useFactory of McpSubscriptionsModule\.forRootAsync\(\); it shapes the module, so it is given to McpSubscriptionsModule\.forRootAsync\(\) itself, beside `useFactory`$/,
    ],
    [
      'a typo of a hub option returned by useFactory',
      { useFactory: () => ({ ...base, retryAfterSecond: 5 }) },
      /Unknown option `retryAfterSecond` of the options returned by the useFactory of McpSubscriptionsModule\.forRootAsync\(\); did you mean `retryAfterSeconds`\? it is an option of the hub, which the module builds: give it as `hub: \{ retryAfterSeconds: … \}`/,
    ],
    [
      'a typo of an extra returned by a useClass',
      { useClass: OptionsWithTypo },
      /Unknown option `guard` of the options returned by OptionsWithTypo\.createMcpSubscriptionsOptions\(\); did you mean `guards`\? it shapes the module/,
    ],
    [
      'a typo of a listen option returned by useFactory',
      { useFactory: () => ({ ...base, authorizeTimeoutMS: 10 }) },
      /Unknown option `authorizeTimeoutMS` of the options returned by the useFactory of McpSubscriptionsModule\.forRootAsync\(\); did you mean `authorizeTimeoutMs`\?/,
    ],
  ];
  for (const [name, options, message] of fromFactory) {
    it(`${name}: forRootAsync() accepts it, the app fails to start`, async () => {
      // The factory has not run yet when the module is defined.
      const definition = McpSubscriptionsModule.forRootAsync(options);
      await rejectsWithOption(compile(definition), message, ErrorCode.UnknownOption);
    });
  }
});

@Injectable()
class DecoratedWithoutMethod {
  canReadUri(): boolean {
    return true;
  }
}

class PlainWithoutMethod {
  check(): boolean {
    return true;
  }
}

class EmptyPlain {}

// Classes as a compiler targeting ES5 emits them: constructor functions, methods on the prototype.
function LegacyWithoutMethod(): void {}
LegacyWithoutMethod.prototype.check = function check(): boolean {
  return true;
};

// Decorated, but no method at all: only its metadata tells it from a function.
function LegacyDecorated(): void {}
Injectable()(LegacyDecorated);

// A subclass without methods of its own.
function LegacySubclass(): void {}
LegacySubclass.prototype = Object.create(PlainWithoutMethod.prototype);
LegacySubclass.prototype.constructor = LegacySubclass;

// Babel's down-levelled classes have a read-only prototype.
function BabelClass(): void {}
Object.defineProperty(BabelClass, 'prototype', { writable: false });

function LegacyReadCheck(): void {}
LegacyReadCheck.prototype.canRead = function canRead(uri: string): boolean {
  return uri.endsWith('/legacy');
};

@Injectable()
class ReadCheck {
  canRead(uri: string): boolean {
    return uri.endsWith('/provider');
  }
}

describe('NestJS module: a hook is a function or `{ useExisting }`, never a bare class', () => {
  const base: McpSubscriptionsModuleOptions = {
    capabilities: { ...CAPABILITIES, tasks: true },
    canAccessTask: () => true,
  };
  const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const classes: [string, unknown][] = [
    ['a decorated class', DecoratedWithoutMethod],
    ['a plain class', PlainWithoutMethod],
    ['an empty plain class', EmptyPlain],
    ['a class compiled to ES5', LegacyWithoutMethod],
    ['a decorated class compiled to ES5, with no method', LegacyDecorated],
    ['a subclass compiled to ES5', LegacySubclass],
    ['a class down-levelled by Babel', BabelClass],
  ];
  const bare = (hook: string, name: string): RegExp =>
    new RegExp(
      `^${escape(`mcp-subscriptions: Expected \`${hook}\` to be a function or \`{ useExisting: <token> }\` (a provider with a \`${hook}()\` method), got the class \`${name}\`: a class is a provider's token, not a function to call. Write \`${hook}: { useExisting: ${name} }\`, with ${name} among a module's providers`)}$`,
    );
  for (const hook of ['canRead', 'handleSubscribeResource', 'canAccessTask'] as const) {
    // A class with the hook's method too: given bare, it is still a token, not the hook.
    for (const [kind, value] of [...classes, ['a provider class with the method', ReadCheck] as const]) {
      const name = (value as { name: string }).name;
      it(`${hook} as ${kind}, given bare: forRoot() throws, saying to write { useExisting: ${name} }`, () => {
        throwsWithOption(
          () => McpSubscriptionsModule.forRoot({ ...base, [hook]: value as never }),
          bare(hook, name),
          ErrorCode.InvalidHook,
        );
      });
    }
    for (const [kind, value] of classes) {
      const name = (value as { name: string }).name;
      it(`${hook} as { useExisting: ${kind} } without ${hook}(): forRoot() throws, naming the class and the method`, () => {
        throwsWithOption(
          () => McpSubscriptionsModule.forRoot({ ...base, [hook]: { useExisting: value as never } }),
          new RegExp(
            `^${escape(`mcp-subscriptions: Expected the class \`${name}\` given as \`${hook}.useExisting\` to have a \`${hook}()\` method`)}$`,
          ),
          ErrorCode.InvalidHook,
        );
      });
    }
  }

  for (const [kind, value] of classes.slice(0, 2)) {
    it(`${kind} given bare, returned by a factory: the app fails to start`, async () => {
      const definition = McpSubscriptionsModule.forRootAsync({
        useFactory: () => ({ ...base, canRead: value as never }),
      });
      await rejectsWithOption(
        compile(definition),
        bare('canRead', (value as { name: string }).name),
        ErrorCode.InvalidHook,
      );
    });
  }

  it('a token given bare, or a provider spelt otherwise, is refused with how to write it', () => {
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ ...base, canRead: 'READ_CHECK' as never }),
      /got the token `READ_CHECK` \(string\)\. Write `canRead: \{ useExisting: 'READ_CHECK' \}`$/,
      ErrorCode.InvalidHook,
    );
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ ...base, canAccessTask: Symbol('TASKS') as never }),
      /Write `canAccessTask: \{ useExisting: YOUR_TOKEN \}`$/,
      ErrorCode.InvalidHook,
    );
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ ...base, canRead: { useClass: ReadCheck } as never }),
      /^mcp-subscriptions: Unknown option `useClass` of `canRead`; the module takes the provider registered in your modules and builds none: give its token as `useExisting`$/,
      ErrorCode.UnknownOption,
    );
    throwsWithOption(
      () => McpSubscriptionsModule.forRoot({ ...base, canRead: { useExisting: 42 } as never }),
      /^mcp-subscriptions: Expected `canRead\.useExisting` to be the token of a provider \(a class, a string or a symbol\), got `42` \(number\)$/,
      ErrorCode.InvalidHook,
    );
  });

  const context = { principal: 'alice', request: {} as never, signal: new AbortController().signal };

  it('a function of any kind is the hook itself: an arrow, a function, an async function, a bound function', async () => {
    function handleSubscribeResource(uri: string): boolean {
      return uri.endsWith('/function');
    }
    const moduleRef = await compile(
      McpSubscriptionsModule.forRoot({
        capabilities: { ...CAPABILITIES, tasks: true },
        canRead: (uri) => uri.startsWith('note://'),
        handleSubscribeResource,
        canAccessTask: async function (this: { owner: string }, taskId: string) {
          await Promise.resolve();
          return taskId === this.owner;
        }.bind({ owner: 'task-1' }),
      }),
    );
    await moduleRef.init();
    const { options } = moduleRef.get(McpSubscriptionsService).handler;
    expect(await options.canRead?.('note://a', context)).toBe(true);
    expect(await options.canRead?.('file://a', context)).toBe(false);
    expect(await options.handleSubscribeResource?.('note://a/function', context)).toBe(true);
    expect(await options.handleSubscribeResource?.('note://a/other', context)).toBe(false);
    expect(await options.canAccessTask?.('task-1', context)).toBe(true);
    expect(await options.canAccessTask?.('task-2', context)).toBe(false);
    await moduleRef.close();
  });

  it('{ useExisting } names a provider, resolved at init, however its class was compiled', async () => {
    @Module({ providers: [ReadCheck, LegacyReadCheck as never], exports: [ReadCheck, LegacyReadCheck as never] })
    class ChecksModule {}
    for (const [check, admitted] of [
      [ReadCheck, 'note://a/provider'],
      [LegacyReadCheck, 'note://a/legacy'],
    ] as const) {
      const moduleRef = await compile(
        McpSubscriptionsModule.forRoot({ capabilities: CAPABILITIES, canRead: { useExisting: check as never } }),
        ChecksModule,
      );
      await moduleRef.init();
      const { options } = moduleRef.get(McpSubscriptionsService).handler;
      expect(await options.canRead?.(admitted, context)).toBe(true);
      expect(await options.canRead?.('note://a/other', context)).toBe(false);
      await moduleRef.close();
    }
  });
});
