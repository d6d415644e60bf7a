/**
 * The wire's names, as the client uses them (MCP revision 2026-07-28). The spec owns them; lib/ keeps
 * its own copies behind its internal door, and the client reaches lib through its public door only.
 */

/** The protocol revision the client speaks: sent in `_meta` and in `MCP-Protocol-Version`. */
export const PROTOCOL_VERSION = '2026-07-28';

/** The method of the request. */
export const LISTEN_METHOD = 'subscriptions/listen';

/** The method of the first message of every stream (spec §2). */
export const ACK_METHOD = 'notifications/subscriptions/acknowledged';

/** `_meta` keys. */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';
export const SUBSCRIPTION_ID_META_KEY = 'io.modelcontextprotocol/subscriptionId';

/** The Tasks extension's name, declared in `clientCapabilities.extensions` to ask for `taskIds` (spec §7). */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** The request headers the client sets itself (lower-case): a caller's `headers` may not set them. */
export const OWN_HEADERS: readonly string[] = ['content-type', 'accept', 'mcp-protocol-version', 'mcp-method'];

/** A plain JSON object, as `JSON.parse` makes it. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
