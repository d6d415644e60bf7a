/** The capability declaration of a server that offers everything. */
import type { SubscriptionCapabilities } from 'mcp-subscriptions';

/**
 * Every capability offered: for the suites whose subject is not the narrowing of an offer (fuzzers,
 * isolation, the handler's own tests), so that a request is refused only for what it asks, never for
 * what the server left out.
 */
export const EVERY_CAPABILITY: Readonly<Required<SubscriptionCapabilities>> = Object.freeze({
  toolsListChanged: true,
  promptsListChanged: true,
  resourcesListChanged: true,
  resourceSubscriptions: true,
  tasks: true,
});
