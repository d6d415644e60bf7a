/**
 * What the host offers on listen streams, declared once. The same declaration narrows every
 * acknowledgement and produces the `capabilities` the host advertises in `server/discover`, so the two
 * can never disagree.
 */
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
