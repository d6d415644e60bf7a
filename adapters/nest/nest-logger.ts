/**
 * The engine's logger on Nest's `Logger`, so runtime failures (a check that throws, a client gone) are
 * reported the way the rest of the app reports, through whatever logger the app installed.
 */
import { Logger } from '@nestjs/common';
import { failureSummary, type Logger as EngineLogger } from '../../lib/internal.ts';

const CONTEXT = 'McpSubscriptions';

/** An engine logger writing through a Nest `Logger` with the context `McpSubscriptions`. */
export function nestLogger(logger: Logger = new Logger(CONTEXT)): EngineLogger {
  return {
    warn: (message: string, details?: unknown) => {
      const why = failureSummary(details);
      logger.warn(why === undefined ? message : `${message}: ${why}`);
    },
    error: (message: string, details?: unknown) => {
      const why = failureSummary(details);
      // One argument: Nest's logger prints a second one as a stack trace.
      logger.error(why === undefined ? message : `${message}: ${why}`);
    },
  };
}
