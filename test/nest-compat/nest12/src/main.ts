/**
 * A NestJS 12 host app compiled to ES modules (Nest 12 ships ESM only), with decorator metadata: the built
 * `mcp-subscriptions/nest` loaded through `import`, constructor injection by type, a global auth
 * guard, a read guard the module reuses per URI, and a host MCP route in the root module.
 */
import 'reflect-metadata';
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import {
  All,
  Controller,
  ForbiddenException,
  Injectable,
  Module,
  Param,
  Post,
  Req,
  Res,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { McpSubscriptionsModule, SubscriptionHub } from 'mcp-subscriptions/nest';

type Req = { headers: Record<string, string | undefined>; body?: any; user?: string };

@Injectable()
class BearerGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Req>();
    const user = /^Bearer (alice|bob)-token$/.exec(req.headers.authorization ?? '')?.[1];
    if (user === undefined) throw new UnauthorizedException();
    req.user = user;
    return true;
  }
}

@Injectable()
class ReadGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Req>();
    if (req.body?.method !== 'resources/read') return true;
    if (String(req.body.params?.uri).startsWith(`note://${req.user}/`)) return true;
    throw new ForbiddenException();
  }
}

/** Injected by type: the metadata tsc emits names the class. */
@Injectable()
class NotesService {
  constructor(private readonly hub: SubscriptionHub) {}

  save(owner: string, name: string): void {
    this.hub.resourceUpdated(`note://${owner}/${name}`);
  }
}

/** Node's response: Express's is one; Fastify's reply is taken over (hijacked) and its `raw` used. */
type Res = ServerResponse | { raw: ServerResponse; hijack(): void };

@Controller('mcp')
@UseGuards(ReadGuard)
class McpController {
  @All()
  handle(@Req() req: Req, @Res() reply: Res): void {
    let res: ServerResponse;
    if ('raw' in reply) {
      reply.hijack();
      res = reply.raw;
    } else {
      res = reply;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ host: true, body: req.body ?? null }));
  }
}

@Controller('notes')
class NotesController {
  constructor(private readonly notes: NotesService) {}

  @Post(':name')
  save(@Req() req: Req, @Param('name') name: string): { saved: string } {
    this.notes.save(String(req.user), name);
    return { saved: name };
  }
}

@Module({
  imports: [
    McpSubscriptionsModule.forRoot({
      capabilities: { toolsListChanged: true, resourceSubscriptions: true },
      guards: [ReadGuard],
      keepAliveMs: false,
    }),
  ],
  controllers: [McpController, NotesController],
  providers: [NotesService, { provide: APP_GUARD, useClass: BearerGuard }],
})
class AppModule {}

const nest = (createRequire(import.meta.url)('@nestjs/core/package.json') as { version: string }).version;
console.log(`format=module nest=${nest} loaded=${import.meta.resolve('mcp-subscriptions/nest')}`);

// NEST_PLATFORM=fastify: the same app on Nest's Fastify platform.
const platform = process.env.NEST_PLATFORM === 'fastify' ? 'fastify' : 'express';
const options = { logger: ['error', 'warn'] as ('error' | 'warn')[] };
const app =
  platform === 'fastify'
    ? await NestFactory.create(AppModule, new FastifyAdapter(), options)
    : await NestFactory.create(AppModule, options);
await app.listen(0, '127.0.0.1');
console.log(`platform=${platform}`);
console.log(`listening on ${await app.getUrl()}/mcp`);
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
