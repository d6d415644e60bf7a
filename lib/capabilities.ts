/**
 * What the host offers on listen streams, declared once. The same declaration narrows every
 * acknowledgement and produces the `capabilities` the host advertises in `server/discover`, so the two
 * can never disagree. A leaf module.
 */

import { describeValue, OptionsError } from './errors.ts';
import { TASKS_EXTENSION } from './events.ts';

/**
 * The change notifications a host can deliver. Every field defaults to `false`.
 *
 * @example
 * ```ts
 * const offer = defineCapabilities({ toolsListChanged: true, resourceSubscriptions: true });
 * new McpServer(info, { capabilities: toServerCapabilities(offer) });
 * app.post('/mcp', mcpSubscriptions({ hub, capabilities: offer, canRead }));
 * ```
 */
export interface SubscriptionCapabilities {
  /** Advertise `tools.listChanged` and honour `toolsListChanged`. @default false */
  readonly toolsListChanged?: boolean;
  /** Advertise `prompts.listChanged` and honour `promptsListChanged`. @default false */
  readonly promptsListChanged?: boolean;
  /** Advertise `resources.listChanged` and honour `resourcesListChanged`. @default false */
  readonly resourcesListChanged?: boolean;
  /** Advertise `resources.subscribe` and honour `resourceSubscriptions`. @default false */
  readonly resourceSubscriptions?: boolean;
  /** Advertise the Tasks extension and honour `taskIds`. @default false */
  readonly tasks?: boolean;
}

/** A resolved, frozen declaration: every field present. */
export type ResolvedCapabilities = Readonly<Required<SubscriptionCapabilities>>;

const FIELDS = [
  'toolsListChanged',
  'promptsListChanged',
  'resourcesListChanged',
  'resourceSubscriptions',
  'tasks',
] as const;

/**
 * Validates and freezes a capability declaration. Throws an `OptionsError` naming the field when a value
 * is not a boolean or a field is unknown (a typo would otherwise silently disable a feature).
 */
export function defineCapabilities(capabilities: SubscriptionCapabilities = {}): ResolvedCapabilities {
  if (typeof capabilities !== 'object' || capabilities === null) {
    throw new OptionsError(`Expected \`capabilities\` to be an object, got ${describeValue(capabilities)}`);
  }
  for (const key of Object.keys(capabilities)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      throw new OptionsError(`Unknown capability \`${key}\`; expected one of ${FIELDS.join(', ')}`);
    }
  }
  const resolved: Record<string, boolean> = {};
  for (const field of FIELDS) {
    const value: unknown = capabilities[field] ?? false;
    if (typeof value !== 'boolean') {
      throw new OptionsError(`Expected \`capabilities.${field}\` to be a boolean, got ${describeValue(value)}`);
    }
    resolved[field] = value;
  }
  return Object.freeze(resolved) as ResolvedCapabilities;
}

/** The `ServerCapabilities` fragment matching a declaration, as `server/discover` advertises it. */
export interface ServerCapabilitiesFragment {
  tools?: { listChanged: true };
  prompts?: { listChanged: true };
  resources?: { listChanged?: true; subscribe?: true };
  extensions?: Record<string, Record<string, never>>;
}

/**
 * The `capabilities` fragment to advertise in `server/discover` for a declaration: merge it into the
 * host MCP server's capabilities so what is advertised and what listen honours come from one place.
 */
export function toServerCapabilities(capabilities: SubscriptionCapabilities): ServerCapabilitiesFragment {
  const caps = defineCapabilities(capabilities);
  const out: ServerCapabilitiesFragment = {};
  if (caps.toolsListChanged) out.tools = { listChanged: true };
  if (caps.promptsListChanged) out.prompts = { listChanged: true };
  if (caps.resourcesListChanged || caps.resourceSubscriptions) {
    out.resources = {
      ...(caps.resourcesListChanged ? { listChanged: true as const } : {}),
      ...(caps.resourceSubscriptions ? { subscribe: true as const } : {}),
    };
  }
  if (caps.tasks) out.extensions = { [TASKS_EXTENSION]: {} };
  return out;
}
