// The app's services, made once per server process: the hub its routes publish to and every listen
// stream is served from, the listen handler in front of MCP, and the SDK's handler for the rest of MCP.
// Kept on globalThis: Next may load this module more than once (one copy per route bundle), and every
// route must share one hub.
import { createMcpHandler, McpServer, type AuthInfo } from '@modelcontextprotocol/server';
import { SubscriptionHub, toServerCapabilities } from 'mcp-subscriptions';
import { createFetchListen, type FetchListen } from 'mcp-subscriptions/fetch';

/** What this server offers: advertised by the SDK's server/discover and honoured by listen, from one declaration. */
const offer = { toolsListChanged: true, resourceSubscriptions: true } as const;

/** The app's auth, standing for a real identity provider: a bearer token names the caller. */
const TOKENS = new Map([
  ['alice-token', 'alice'],
  ['bob-token', 'bob'],
]);

/** The caller of a request, or `undefined` for a missing or unknown token. */
export function callerOf(request: Request): string | undefined {
  const token = /^Bearer (\S+)$/i.exec(request.headers.get('authorization') ?? '')?.[1];
  return token === undefined ? undefined : TOKENS.get(token);
}

/** The caller in the SDK's shape, for its handler's callbacks. */
export function authInfoOf(caller: string): AuthInfo {
  return { token: '', clientId: 'example', scopes: [], extra: { sub: caller } };
}

/** The read check: `note://<owner>/…` is its owner's. listen's per-URI check is this very function. */
export const mayRead = (principal: string, uri: string): boolean => uri.startsWith(`note://${principal}/`);

interface Services {
  readonly hub: SubscriptionHub;
  readonly listen: FetchListen;
  readonly mcp: ReturnType<typeof createMcpHandler>;
}

function create(): Services {
  const hub = new SubscriptionHub();
  const listen = createFetchListen({
    hub,
    capabilities: offer,
    principal: callerOf,
    canRead: (uri, { principal }) => mayRead(principal, uri),
  });
  const mcp = createMcpHandler(
    () =>
      new McpServer(
        { name: 'mcp-subscriptions-example-next', version: '1.0.0' },
        { capabilities: toServerCapabilities(offer) },
      ),
    { bus: hub },
  );
  return { hub, listen, mcp };
}

const KEY = Symbol.for('mcp-subscriptions-example-next.services');
const holder = globalThis as typeof globalThis & { [KEY]?: Services };

export const services: Services = (holder[KEY] ??= create());
