/**
 * The change events host code publishes, and the wire names they map to. A leaf module: it imports
 * nothing of ours.
 */

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
/** The protocol revisions this library serves listen for. */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = Object.freeze(['2026-07-28']);

/** The JSON-RPC request id of a listen request: used verbatim as its subscription id. */
export type RequestId = string | number;

/** The state of a task, as the Tasks extension's `notifications/tasks` carries it (spec §7). */
export interface TaskState {
  readonly taskId: string;
  readonly status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  readonly statusMessage?: string;
  /** ISO 8601 timestamp. */
  readonly createdAt: string;
  /** ISO 8601 timestamp. */
  readonly lastUpdatedAt: string;
  readonly ttlMs: number | null;
  readonly pollIntervalMs?: number;
  readonly [field: string]: unknown;
}

/**
 * A change event. The first four are the official SDK's `ServerEvent` shapes (`kind` and, for
 * `resource_updated`, `uri`), so a hub can stand in for the SDK's `ServerEventBus`.
 */
export type SubscriptionEvent =
  | { readonly kind: 'tools_list_changed' }
  | { readonly kind: 'prompts_list_changed' }
  | { readonly kind: 'resources_list_changed' }
  | { readonly kind: 'resource_updated'; readonly uri: string }
  | {
      readonly kind: 'task_status';
      /** The task's full state, sent as the notification's params. */
      readonly task: TaskState;
      /** The principal that owns the task: only its streams receive the event. */
      readonly owner: string;
    };

/**
 * The four MCP change events, exactly the official SDK's `ServerEvent` kinds: what a `ServerEventBus`
 * listener understands.
 */
export type McpChangeEvent = Exclude<SubscriptionEvent, { readonly kind: 'task_status' }>;

/** The `kind` of a {@link SubscriptionEvent}. */
export type SubscriptionEventKind = SubscriptionEvent['kind'];

/** The list-change kinds: level-triggered events that carry nothing but their kind. */
export type ListChangedKind = 'tools_list_changed' | 'prompts_list_changed' | 'resources_list_changed';

/** The notification method each event kind is written as (spec §3). */
export const NOTIFICATION_METHODS: Readonly<Record<SubscriptionEventKind, string>> = Object.freeze({
  tools_list_changed: 'notifications/tools/list_changed',
  prompts_list_changed: 'notifications/prompts/list_changed',
  resources_list_changed: 'notifications/resources/list_changed',
  resource_updated: 'notifications/resources/updated',
  task_status: 'notifications/tasks',
});

/** The filter of a listen request, after validation (spec §1). Absent means "not wanted". */
export interface NotificationFilter {
  readonly toolsListChanged?: true;
  readonly promptsListChanged?: true;
  readonly resourcesListChanged?: true;
  readonly resourceSubscriptions?: readonly string[];
  readonly taskIds?: readonly string[];
}
