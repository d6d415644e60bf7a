import type { AuthInfo } from '@modelcontextprotocol/server';
import type { onRequestAsyncHookHandler } from 'fastify';

// `request.auth`, typed for every route of the app.
declare module 'fastify' {
  interface FastifyRequest {
    auth?: AuthInfo;
  }
}

// A token table standing in for your identity provider.
const USERS = new Map(Object.entries({ 'alice-token': 'alice', 'bob-token': 'bob' }));

/** An `onRequest` hook: 401 without a known `Authorization: Bearer <token>`; otherwise sets `request.auth`. */
export const bearerAuth: onRequestAsyncHookHandler = async (request, reply) => {
  const token = /^Bearer (\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
  const user = token === undefined ? undefined : USERS.get(token);
  if (token === undefined || user === undefined) {
    return reply.code(401).header('WWW-Authenticate', 'Bearer').send({ error: 'unauthorized' });
  }
  request.auth = { token, clientId: 'notes-example', scopes: [], extra: { sub: user } };
};
