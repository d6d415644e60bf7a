/**
 * The wire's names (MCP revision 2026-07-28): methods, `_meta` keys, protocol revisions, and the
 * notification each change event is written as. The spec owns them; this leaf is their one copy in the
 * package, for the engine and the client alike. It imports only types.
 */
import type { SubscriptionEventKind } from './types.ts';

/** The listen request's method (spec §1). */
export const LISTEN_METHOD = 'subscriptions/listen';
/** The cancellation notification's method (spec §4). */
export const CANCELLED_METHOD = 'notifications/cancelled';
/** The method of the first message of every listen stream, its acknowledgement (spec §2). */
export const ACK_METHOD = 'notifications/subscriptions/acknowledged';

/** `_meta` key that tags every message of a listen stream with the listen request's id (spec §3). */
export const SUBSCRIPTION_ID_META_KEY = 'io.modelcontextprotocol/subscriptionId';
/** `_meta` key carrying the protocol revision on every request (spec §1). */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
/** `_meta` key carrying the client's capabilities on every request (spec §1). */
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';
/** `_meta` key the terminal result may carry the server's identity under (spec §4). */
export const SERVER_INFO_META_KEY = 'io.modelcontextprotocol/serverInfo';
/** The Tasks extension's identifier, in `capabilities.extensions` (spec §7). */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The newest protocol revision this library speaks: the one the client sends. */
export const LATEST_PROTOCOL_VERSION = '2026-07-28';
/** The protocol revisions this library serves listen for. */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = Object.freeze([LATEST_PROTOCOL_VERSION]);

/** The notification method each event kind is written as (spec §3). */
export const NOTIFICATION_METHODS: Readonly<Record<SubscriptionEventKind, string>> = Object.freeze({
  tools_list_changed: 'notifications/tools/list_changed',
  prompts_list_changed: 'notifications/prompts/list_changed',
  resources_list_changed: 'notifications/resources/list_changed',
  resource_updated: 'notifications/resources/updated',
  task_status: 'notifications/tasks',
});
