/**
 * The core that both ends of the wire share: the errors and their codes, the option checks (each with
 * its code, unknown keys with the nearest known one suggested) and the wire's names (methods, `_meta`
 * keys, protocol revisions). It is part of the adapters' door,
 * lib/internal.ts, which re-exports it and through which the client and the other adapters reach it;
 * the package's `exports` do not publish it.
 *
 * Only leaves stand behind it (errors.ts, validate.ts, events.ts, and types by `import type`): nothing
 * it reaches at run time imports `node:http`, `node:net` or a framework (ESLint enforces it), so the
 * leaves stay importable by any module of lib without pulling the server in.
 */
export { describeValue, ErrorCode, hasErrorCode, McpSubscriptionsError, OptionsError, RpcErrorCode } from './errors.ts';
export type { ErrorCodeValue } from './errors.ts';
export {
  booleanOption,
  durationMs,
  durationOrFalse,
  given,
  isPlainObject,
  knownKeys,
  loggerOption,
  MAX_TIMER_MS,
  nearestKey,
  oneOf,
  optionalFunction,
  optionKeys,
  optionsObject,
  positiveInteger,
  positiveIntegerOrFalse,
} from './validate.ts';
export {
  ACK_METHOD,
  CANCELLED_METHOD,
  CLIENT_CAPABILITIES_META_KEY,
  LATEST_PROTOCOL_VERSION,
  LISTEN_METHOD,
  NOTIFICATION_METHODS,
  PROTOCOL_VERSION_META_KEY,
  SERVER_INFO_META_KEY,
  SUBSCRIPTION_ID_META_KEY,
  SUPPORTED_PROTOCOL_VERSIONS,
  TASKS_EXTENSION,
} from './events.ts';
export type { NotificationFilter, RequestId } from './types.ts';
