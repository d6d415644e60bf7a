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

// A token table standing in for your identity provider.
const USERS = new Map(Object.entries({ 'alice-token': 'alice', 'bob-token': 'bob' }));

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
