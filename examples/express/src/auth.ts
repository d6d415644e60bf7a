/**
 * The app's own bearer auth: a fixed token table standing in for your identity provider. It sets
 * `req.auth` in the SDK's `AuthInfo` shape, which both the SDK's handler (as `ctx.http.authInfo`)
 * and mcp-subscriptions (the principal is `req.auth.extra.sub`) read.
 */
import type { AuthInfo } from '@modelcontextprotocol/server';
import type { RequestHandler } from 'express';

// `req.auth`, typed for every Express handler of the app.
declare global {
  namespace Express {
    interface Request {
      auth?: AuthInfo;
    }
  }
}

const USERS: ReadonlyMap<string, string> = new Map([
  ['alice-token', 'alice'],
  ['bob-token', 'bob'],
]);

/** 401 without a known `Authorization: Bearer <token>`; otherwise sets `req.auth` and goes on. */
export const bearerAuth: RequestHandler = (req, res, next) => {
  const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  const user = token === undefined ? undefined : USERS.get(token);
  if (token === undefined || user === undefined) {
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unauthorized' });
    return;
  }
  req.auth = { token, clientId: 'notes-example', scopes: [], extra: { sub: user } };
  next();
};

/** The user an `AuthInfo` set by {@link bearerAuth} belongs to. */
export function principalOf(auth: AuthInfo | undefined): string | undefined {
  const sub = auth?.extra?.['sub'];
  return typeof sub === 'string' ? sub : undefined;
}
