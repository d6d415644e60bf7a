/**
 * `@rekog/mcp-nest` 2.x in the same app as the module. It serves MCP through a microservice strategy
 * bound to the app's HTTP adapter, in one of two ways:
 *
 * - behind a controller (`McpHttpControllerFor(transport)`), which is a Nest route with the app's
 *   guards: the listen route goes in front of it, serves listen, and hands it everything else;
 * - self-mounted (its default without a controller): it registers `POST /mcp` on the HTTP adapter
 *   directly when the microservices start, before Nest registers any route, and outside Nest's
 *   routing, so no guard runs. It then answers listen itself, with the SDK's built-in listen: it
 *   cannot coexist with the module (or with the app's guards), and the module reports it as an error at
 *   start-up. The
 *   second test is the reproduction.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Module, UseGuards, type INestApplication } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { McpController, McpHttpControllerFor, McpStrategy, StreamableHttpTransport, Tool } from '@rekog/mcp-nest';
import { SubscriptionHub } from 'mcp-subscriptions';
import { McpSubscriptionsModule } from 'mcp-subscriptions/nest';
import { expectToBe } from '../helpers/assert.ts';
import { BASE_OPTIONS, BearerGuard, bearer, GuardLogModule, ReadGuard, warningsLogger } from '../helpers/nest-apps.ts';
import { mcpRequest } from '../helpers/sample-app.ts';
import { listen, type SseStream } from '../helpers/sse.ts';

@McpController()
class GreetingTools {
  @Tool({ name: 'greet', description: 'Says hello.' })
  greet(): { content: { type: 'text'; text: string }[] } {
    return { content: [{ type: 'text', text: 'hello' }] };
  }
}

const apps: INestApplication[] = [];
const streams: SseStream[] = [];

afterEach(async () => {
  for (const stream of streams.splice(0)) stream.close();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function startRekogApp(mode: 'controller' | 'self-mounted') {
  const transport = new StreamableHttpTransport();
  const strategy = new McpStrategy({ name: 'rekog-greeter', version: '1.0.0', transports: [transport] });
  const controllers: unknown[] = [GreetingTools];
  if (mode === 'controller') {
    // The host's MCP route, the way @rekog/mcp-nest documents it for an authenticated server.
    @Controller('mcp')
    @UseGuards(ReadGuard)
    class RekogMcpController extends McpHttpControllerFor(transport) {}
    controllers.unshift(RekogMcpController);
  }
  @Module({
    imports: [GuardLogModule.register([]), McpSubscriptionsModule.forRoot(BASE_OPTIONS)],
    controllers: controllers as never[],
    providers: [{ provide: APP_GUARD, useClass: BearerGuard }],
  })
  class AppModule {}

  const logger = warningsLogger();
  const app = await NestFactory.create<NestExpressApplication>(AppModule, { logger, abortOnError: false });
  apps.push(app);
  strategy.setHttpAdapter(app.getHttpAdapter());
  app.connectMicroservice({ strategy });
  // The order @rekog/mcp-nest documents: its routes are mounted before the server accepts connections.
  await app.startAllMicroservices();
  await app.listen(0, '127.0.0.1');
  return { app, url: `${await app.getUrl()}/mcp`, hub: app.get(SubscriptionHub), logger };
}

async function openListen(url: string, id: string) {
  const stream = await listen(
    url,
    id,
    { toolsListChanged: true, resourceSubscriptions: ['note://alice/a', 'note://bob/b'] },
    bearer('alice-token'),
  );
  streams.push(stream);
  return stream;
}

describe('@rekog/mcp-nest 2.x in the same app', () => {
  it('behind its controller: listen is served by the module, every other request by @rekog/mcp-nest', async () => {
    const { url, hub, logger } = await startRekogApp('controller');
    const tools = await mcpRequest(url, 'alice-token', 'tools/list');
    expectToBe(tools.status, 200, tools.text);
    expect((tools.message?.result?.tools as { name: string }[]).map((tool) => tool.name)).toStrictEqual(['greet']);
    const call = await mcpRequest(url, 'alice-token', 'tools/call', { name: 'greet', arguments: {} });
    expectToBe(call.message?.result?.content?.[0]?.text, 'hello', call.text);
    const unauthenticated = await mcpRequest(url, undefined, 'tools/list');
    // Its route is behind the app guards too.
    expect(unauthenticated.status).toBe(401);

    const stream = await openListen(url, 'behind-controller');
    const ack = (await stream.event(1)).json;
    expect(ack.params.notifications).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/a'],
    });
    // The module served it.
    expect(hub.stats().opened).toBe(1);
    expect(logger.lines.filter((line) => /outside Nest routing/.test(line))).toStrictEqual([]);
  });

  it('self-mounted (reproduction): its route precedes every Nest route, so it answers listen itself, past the guards', async () => {
    const { url, hub, logger } = await startRekogApp('self-mounted');
    // No token at all: the module's route would answer 401 (the global guard); this one streams.
    const anonymous = await listen(url, 'self-mounted', { toolsListChanged: true });
    streams.push(anonymous);
    expect(anonymous.status).toBe(200);
    expect(String(anonymous.headers['content-type'])).toMatch(/^text\/event-stream/);
    expect((await anonymous.event(1)).json?.method).toBe('notifications/subscriptions/acknowledged');
    // The SDK's built-in listen served it: the module's hub never saw a stream.
    expect(hub.stats().opened).toBe(0);
    // The module reports it at start-up, as an error (a failure prints the lines it got).
    expectToBe(
      logger.lines.some((line) => /^error: .*outside Nest routing/.test(line) && /McpHttpControllerFor/.test(line)),
      true,
      JSON.stringify(logger.lines),
    );
  });
});
