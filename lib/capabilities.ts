/**
 * What the host offers on listen streams, declared once. The same declaration narrows every
 * acknowledgement and produces the `capabilities` the host advertises in `server/discover`, so the two
 * can never disagree.
 */
import { describeValue, ErrorCode, OptionsError } from './errors.ts';
import { TASKS_EXTENSION } from './events.ts';
import type { ResolvedCapabilities, ServerCapabilitiesFragment, SubscriptionCapabilities } from './types.ts';
import { booleanOption, knownKeys, optionKeys, optionsObject } from './validate.ts';

/** Every field of {@link SubscriptionCapabilities}, checked against the interface by the compiler. */
const FIELDS = optionKeys<SubscriptionCapabilities>({
  toolsListChanged: true,
  promptsListChanged: true,
  resourcesListChanged: true,
  resourceSubscriptions: true,
  tasks: true,
});

/**
 * Validates and freezes a capability declaration. Throws an `OptionsError` naming the field when a value
 * is not a boolean or a field is unknown (a typo would otherwise silently disable a feature).
 */
export function defineCapabilities(capabilities: SubscriptionCapabilities = {}): ResolvedCapabilities {
  optionsObject(capabilities, '`capabilities`');
  knownKeys(capabilities, FIELDS, '`capabilities`', {}, 'capability');
  const resolved: Record<string, boolean> = {};
  for (const field of FIELDS) {
    resolved[field] = booleanOption(`capabilities.${field}`, (capabilities as Record<string, unknown>)[field] ?? false);
  }
  return Object.freeze(resolved) as ResolvedCapabilities;
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

/**
 * What {@link advertiseOffer} needs of an MCP server: the official SDK's low-level `Server`, or its
 * `McpServer` (whose `server` is one). Typed by shape, so this module imports no SDK.
 */
export interface CapabilitiesHolder {
  getCapabilities(): object;
  registerCapabilities(capabilities: object): void;
}

type Kind = 'tools' | 'prompts' | 'resources';
const LIST_FLAG: Readonly<Record<Kind, keyof SubscriptionCapabilities>> = Object.freeze({
  tools: 'toolsListChanged',
  prompts: 'promptsListChanged',
  resources: 'resourcesListChanged',
});

/**
 * The capabilities `server` would advertise, with every `listChanged` and `resources.subscribe` bit set
 * to exactly what the offer honours. Only kinds the server already advertises are touched: a kind is
 * never added or removed here, since that says whether the server has tools, prompts or resources.
 */
export function clampToOffer(advertised: object, offer: ResolvedCapabilities): object {
  const out: Record<string, unknown> = { ...advertised };
  for (const kind of ['tools', 'prompts', 'resources'] as const) {
    const current = out[kind];
    if (typeof current !== 'object' || current === null) continue;
    const next: Record<string, unknown> = { ...(current as Record<string, unknown>) };
    delete next.listChanged;
    if (offer[LIST_FLAG[kind]]) next.listChanged = true;
    if (kind === 'resources') {
      delete next.subscribe;
      if (offer.resourceSubscriptions) next.subscribe = true;
    }
    out[kind] = next;
  }
  return out;
}

/**
 * Makes an MCP server advertise exactly what listen honours, whatever it registers later. Merges
 * {@link toServerCapabilities} of the offer into the server's capabilities, and from then on every
 * `listChanged` and `resources.subscribe` bit it advertises (in `server/discover` and `initialize`) is
 * the offer's: the official SDK's `McpServer` turns `listChanged` on by itself for every kind it
 * registers (a resource, a prompt), which would promise notifications listen does not deliver.
 * Call it before the server is connected (the SDK refuses new capabilities after). Returns `server`.
 *
 * @example
 * ```ts
 * const offer = defineCapabilities({ toolsListChanged: true, resourceSubscriptions: true });
 * const server = advertiseOffer(new McpServer({ name: 'notes', version: '1.0.0' }), offer);
 * server.registerResource(...); // resources.listChanged stays off: the offer does not honour it
 * ```
 */
export function advertiseOffer<S extends CapabilitiesHolder | { readonly server: CapabilitiesHolder }>(
  server: S,
  offer: SubscriptionCapabilities,
): S {
  const resolved = defineCapabilities(offer);
  const holder = (
    typeof server === 'object' && server !== null && 'server' in server ? server.server : server
  ) as Partial<CapabilitiesHolder> | null;
  if (typeof holder?.getCapabilities !== 'function' || typeof holder.registerCapabilities !== 'function') {
    throw new OptionsError(
      ErrorCode.InvalidServer,
      `Expected an MCP server (the SDK's McpServer or Server, with getCapabilities() and registerCapabilities()), got ${describeValue(server)}`,
    );
  }
  const target = holder as CapabilitiesHolder;
  target.registerCapabilities(toServerCapabilities(resolved));
  const advertised = target.getCapabilities.bind(target);
  // Clamped when read, not when registered: the SDK registers a kind's capability the first time one
  // of its items is registered, at any point before the server is connected.
  target.getCapabilities = () => clampToOffer(advertised(), resolved);
  return server;
}
