/**
 * The default principal: what the caller's guards left on the request.
 */
import type { McpRequest } from './mcp-subscriptions.interfaces.ts';

function stringField(value: unknown, ...names: string[]): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  for (const name of names) {
    const field = (value as Record<string, unknown>)[name];
    if (typeof field === 'string' && field !== '') return field;
  }
  return undefined;
}

/**
 * `req.auth` as the SDK's `requireBearerAuth` sets it (`extra.sub`, else `extra.principal`, else
 * `clientId`), else `req.user` as Passport sets it (a string, or its `id`, `sub` or `username`).
 * The same rule as the Express middleware's, so one app answers alike on either.
 */
export function defaultPrincipal(req: McpRequest): string | undefined {
  const { auth, user } = req;
  if (auth !== undefined && auth !== null) {
    return stringField((auth as { extra?: unknown }).extra, 'sub', 'principal') ?? stringField(auth, 'clientId');
  }
  if (typeof user === 'string' && user !== '') return user;
  return stringField(user, 'id', 'sub', 'username');
}
