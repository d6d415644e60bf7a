// The source of every CommonJS consumer of the packed package but the `nest new` apps (test/system/
// package.test.ts writes it into each consumer's src/ before compiling it there): a value and a type
// from each entry, then where the entries were found, printed as one JSON line.
import { SubscriptionHub, type HubStats } from 'mcp-subscriptions';
import { mcpSubscriptions, type McpSubscriptionsMiddleware } from 'mcp-subscriptions/express';
import { mcpSubscriptions as fastifyPlugin, type McpSubscriptionsFastifyOptions } from 'mcp-subscriptions/fastify';
import { McpSubscriptionsModule, type McpSubscriptionsModuleOptions } from 'mcp-subscriptions/nest';
import { RedisBus, type RedisBusStats } from 'mcp-subscriptions/redis';
import { PostgresBus, type PostgresBusStats } from 'mcp-subscriptions/postgres';
import { listen, ListenError, type ListenOptions, type SubscriptionItem } from 'mcp-subscriptions/client';

const hub = new SubscriptionHub();
const stats: HubStats = hub.stats();
const middleware: McpSubscriptionsMiddleware = mcpSubscriptions({ hub, capabilities: { toolsListChanged: true } });
const pluginOptions: McpSubscriptionsFastifyOptions = { hub, capabilities: { toolsListChanged: true }, path: '/mcp' };
const options: McpSubscriptionsModuleOptions = { capabilities: { toolsListChanged: true } };
const dynamicModule = McpSubscriptionsModule.forRoot(options);
const redisStats: keyof RedisBusStats = 'connected';
const postgresStats: keyof PostgresBusStats = 'connected';
const listenOptions: ListenOptions = { maxBuffer: 10, reconnect: { maxAttempts: 3 } };
const listenError = new ListenError('ERR_MCP_SUBSCRIPTIONS_LISTEN_REFUSED', 'refused', { status: 503 });
const endItem: SubscriptionItem = { type: 'end', reason: 'closed' };

// Never called: it proves the types are the package's own, not `any`, since a wrong option must not compile.
export function misuse(): SubscriptionHub {
  // @ts-expect-error `maxSubscriptions` is a number
  return new SubscriptionHub({ maxSubscriptions: 'many' });
}

// Never called either: the Fastify plugin's options are typed.
export function misusePlugin(): McpSubscriptionsFastifyOptions {
  // @ts-expect-error `path` is a string
  return { hub, capabilities: {}, path: 42 };
}

// Never called either: the client's options are typed too.
export function misuseClient(): unknown {
  // @ts-expect-error `overflow` is one of the client's policies
  return listen('http://127.0.0.1/mcp', { toolsListChanged: true }, { overflow: 'block' });
}

console.log(
  JSON.stringify({
    format: 'commonjs',
    resolved: {
      '.': require.resolve('mcp-subscriptions'),
      './express': require.resolve('mcp-subscriptions/express'),
      './fastify': require.resolve('mcp-subscriptions/fastify'),
      './nest': require.resolve('mcp-subscriptions/nest'),
      './redis': require.resolve('mcp-subscriptions/redis'),
      './postgres': require.resolve('mcp-subscriptions/postgres'),
      './client': require.resolve('mcp-subscriptions/client'),
    },
    values: {
      SubscriptionHub: typeof SubscriptionHub,
      openStreams: stats.openStreams,
      mcpSubscriptions: typeof middleware,
      fastifyPlugin: typeof fastifyPlugin === 'function' && pluginOptions.path === '/mcp',
      McpSubscriptionsModule: dynamicModule.module === McpSubscriptionsModule,
      RedisBus: typeof RedisBus,
      redisStats,
      PostgresBus: typeof PostgresBus,
      postgresStats,
      listen: typeof listen,
      listenErrorCode: endItem.type === 'end' && listenOptions.maxBuffer === 10 ? listenError.code : '',
    },
  }),
);
void hub.close();
