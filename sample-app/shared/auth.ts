/**
 * The host app's own authentication: a fixed bearer-token table standing for a real identity
 * provider. The Express middleware and the Nest guard both resolve callers through it.
 */
import type { AuthInfo } from '@modelcontextprotocol/server';

/** The principal that `MCP_CONFORMANCE=1` serves token-less `/mcp` requests as. */
export const CONFORMANCE_PRINCIPAL = 'conformance';

/** The owner of notes every principal may read and write. */
export const SHARED_OWNER = 'shared';

// A Map, not an object literal: a token such as `__proto__` or `constructor` must resolve to nothing.
const TOKENS: ReadonlyMap<string, string> = new Map([
  ['alice-token', 'alice'],
  ['bob-token', 'bob'],
  ['carol-token', 'carol'],
]);

/** The principal a bearer token belongs to, or `undefined` for an unknown token. */
export function principalForToken(token: string): string | undefined {
  return TOKENS.get(token);
}

/**
 * The token of an `Authorization: Bearer <token>` header value, or `undefined` when the header is
 * absent, uses another scheme or carries no token. The scheme is case-insensitive (RFC 7235 §2.1).
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  return match?.[1];
}

/**
 * Resolves a request's caller from its `Authorization` header: the principal, or `undefined` for a
 * missing or unknown token (answer 401). With `conformance` on, a request with no `Authorization`
 * header at all is {@link CONFORMANCE_PRINCIPAL}; a wrong token is still refused.
 */
export function authenticate(
  authorization: string | undefined,
  options: { readonly conformance: boolean },
): { readonly principal: string; readonly token: string } | undefined {
  if (authorization === undefined && options.conformance) {
    return { principal: CONFORMANCE_PRINCIPAL, token: '' };
  }
  const token = bearerToken(authorization);
  const principal = token === undefined ? undefined : principalForToken(token);
  return principal === undefined || token === undefined ? undefined : { principal, token };
}

/** The client id every sample-app `AuthInfo` carries. */
export const CLIENT_ID = 'sample-app';

/**
 * A caller as the SDK's `AuthInfo`, the shape both `mcp-subscriptions` (its default principal reads
 * `extra.sub`) and the SDK's handler (`authInfo` in every callback) understand.
 */
export function toAuthInfo(caller: { readonly principal: string; readonly token: string }): AuthInfo {
  return { token: caller.token, clientId: CLIENT_ID, scopes: [], extra: { sub: caller.principal } };
}

/** The principal of an `AuthInfo` made by {@link toAuthInfo}; `undefined` for an unauthenticated call. */
export function principalOf(authInfo: AuthInfo | undefined): string | undefined {
  const sub = authInfo?.extra?.['sub'];
  return typeof sub === 'string' && sub !== '' ? sub : undefined;
}
