/**
 * Injection tokens and metadata keys of the NestJS module. Symbols are registered with `Symbol.for()`,
 * so that an ESM and a CommonJS copy of the package in one process still name the same provider.
 */
import type { McpSubscriptionsOptionsFactory } from './mcp-subscriptions.interfaces.ts';

/**
 * The options given to `forRoot()` (without `path`, `guards` and `isGlobal`), or returned by the
 * `forRootAsync()` factory: the `ConfigurableModuleBuilder`'s options token.
 */
export const MCP_SUBSCRIPTIONS_OPTIONS: unique symbol = Symbol.for('mcp-subscriptions:options');

/** The same options once validated, with defaults applied (internal: the hub and the service inject it). */
export const MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS: unique symbol = Symbol.for('mcp-subscriptions:resolved-options');

/** The method `forRootAsync({ useClass })` and `forRootAsync({ useExisting })` call for the options. */
export const OPTIONS_FACTORY_METHOD = 'createMcpSubscriptionsOptions' satisfies keyof McpSubscriptionsOptionsFactory;

/** The route options (path, guards, readGuards, isGlobal) once validated (internal: the service injects them). */
export const MCP_SUBSCRIPTIONS_ROUTE_OPTIONS: unique symbol = Symbol.for('mcp-subscriptions:route-options');

/** The provider whose class and method the host's guards see when they decide a URI (see the module docs). */
export const MCP_SUBSCRIPTIONS_READ_CONTEXT: unique symbol = Symbol.for('mcp-subscriptions:read-context');

/** Set on the listen route's handler: lets the module find its own route among the HTTP adapter's. */
export const MCP_SUBSCRIPTIONS_ROUTE = 'mcp-subscriptions:route';

/** The MCP path listen is mounted on when `path` is not given. */
export const DEFAULT_MCP_PATH = '/mcp';

/** The method the module presents to the host's guards for each URI (spec: the read check of `resources/read`). */
export const RESOURCES_READ_METHOD = 'resources/read';
