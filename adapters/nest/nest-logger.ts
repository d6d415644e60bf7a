/**
 * The engine's logger on Nest's `Logger`, so runtime failures (a check that throws, a client gone) are
 * reported the way the rest of the app reports, through whatever logger the app installed.
 */
import { inspect } from 'node:util';
import { Logger } from '@nestjs/common';
import type { Logger as EngineLogger } from '../../lib/internal.ts';

const CONTEXT = 'McpSubscriptions';

function describe(details: unknown): string | undefined {
  const error = (details as { error?: unknown } | undefined)?.error;
  if (error instanceof Error) return error.stack ?? `${error.name}: ${error.message}`;
  return error === undefined ? undefined : inspect(error);
}

/** An engine logger writing through a Nest `Logger` with the context `McpSubscriptions`. */
export function nestLogger(logger: Logger = new Logger(CONTEXT)): EngineLogger {
  return {
    warn: (message: string, details?: unknown) => {
      const why = describe(details);
      logger.warn(why === undefined ? message : `${message}: ${why}`);
    },
    error: (message: string, details?: unknown) => {
      logger.error(message, describe(details));
    },
  };
}
