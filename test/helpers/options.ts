/**
 * What every option mistake looks like: an `OptionsError` thrown at construction, whose `code` is one
 * of the option codes (one per check, docs/error-codes.md) and whose message starts with the package
 * name. Tests that care which check failed assert the exact code on top.
 */
import { expect } from '@jest/globals';
import { ErrorCode } from 'mcp-subscriptions';
import { thrown } from './assert.ts';

const RUNTIME_CODES: readonly string[] = [
  ErrorCode.InvalidEvent,
  ErrorCode.Protocol,
  ErrorCode.CheckTimeout,
  ErrorCode.AuthorizeDeadline,
  ErrorCode.Internal,
  ErrorCode.UncheckedListen,
  // An OptionsError by class, but reported at run time: the url form of RedisBus loads its library
  // asynchronously, after the constructor returned; so does the url form of PostgresBus.
  ErrorCode.RedisClientMissing,
  ErrorCode.PostgresClientMissing,
  // The client's: a listen that did not get as far as its acknowledgement, and waitFor() giving up.
  ErrorCode.ListenRefused,
  ErrorCode.ListenFailed,
  ErrorCode.ListenEndedBeforeAck,
  ErrorCode.ListenInvalidAck,
  ErrorCode.ListenAckTimeout,
  ErrorCode.ListenAborted,
  ErrorCode.ListenEventTooLarge,
  ErrorCode.ListenIdleTimeout,
  ErrorCode.WaitTimeout,
  ErrorCode.WaitEnded,
];

/** The codes an `OptionsError` may carry. */
export const OPTION_ERROR_CODES: readonly string[] = Object.values(ErrorCode).filter(
  (code) => !RUNTIME_CODES.includes(code),
);

/** Asserts that `error` is an option mistake (a failure shows the error received). */
export function expectOptionsError(error: unknown): void {
  expect(error).toMatchObject({
    name: 'OptionsError',
    code: expect.stringMatching(/^ERR_MCP_SUBSCRIPTIONS_/),
    message: expect.stringMatching(/^mcp-subscriptions: /),
  });
  expect(OPTION_ERROR_CODES).toContain((error as { code: string }).code);
}

/** What `construct` throws, asserted to be an option mistake (see {@link expectOptionsError}). */
export function optionsErrorOf(construct: () => unknown): Error & { code?: string } {
  const error = thrown(construct);
  expectOptionsError(error);
  return error;
}
