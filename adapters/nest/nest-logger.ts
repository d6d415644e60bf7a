/**
 * The engine's logger on Nest's `Logger`, so runtime failures (a check that throws, a client gone) are
 * reported the way the rest of the app reports, through whatever logger the app installed.
 */
import { Logger } from '@nestjs/common';
import type { Logger as EngineLogger } from '../../lib/internal.ts';

const CONTEXT = 'McpSubscriptions';

/**
 * What the log says of a failure: its name and code, as the diagnostics channels do. Never its message
 * or stack: a host check's error may quote the URI or the task id it was asked about, and logs are read
 * by more people than may know them.
 */
function describe(details: unknown): string | undefined {
  if (typeof details !== 'object' || details === null) return undefined;
  // The engine reports a failed check as `{ errorName, errorCode }` already; other failures carry `error`.
  const given = details as { error?: unknown; errorName?: unknown; errorCode?: unknown };
  let name: unknown = given.errorName;
  let code: unknown = given.errorCode;
  if ('error' in given) {
    const error = given.error;
    if (typeof error !== 'object' || error === null) return typeof error;
    name = (error as { name?: unknown }).name;
    code = (error as { code?: unknown }).code;
  } else if (name === undefined && code === undefined) {
    return undefined;
  }
  const named = typeof name === 'string' ? name : 'error';
  return typeof code === 'string' || typeof code === 'number' ? `${named} (${String(code)})` : named;
}

/** An engine logger writing through a Nest `Logger` with the context `McpSubscriptions`. */
export function nestLogger(logger: Logger = new Logger(CONTEXT)): EngineLogger {
  return {
    warn: (message: string, details?: unknown) => {
      const why = describe(details);
      logger.warn(why === undefined ? message : `${message}: ${why}`);
    },
    error: (message: string, details?: unknown) => {
      const why = describe(details);
      // One argument: Nest's logger prints a second one as a stack trace.
      logger.error(why === undefined ? message : `${message}: ${why}`);
    },
  };
}
