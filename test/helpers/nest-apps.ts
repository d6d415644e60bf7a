/**
 * Nest host apps for the module's tests: a global bearer guard (`APP_GUARD`), a read guard on the MCP
 * route that decides `resources/read`, and something serving the rest of MCP on `/mcp` (a controller
 * that echoes what reached it, or the official SDK's handler). The MCP controller sits in the root
 * module, so its route is registered before the listen route: the module must still come first.
 * Every app listens on 127.0.0.1 port 0 and is closed by the test that made it.
 */
import 'reflect-metadata';
import type { ServerResponse } from 'node:http';
import {
  All,
  Controller,
  ForbiddenException,
  Global,
  HttpException,
  Inject,
  Injectable,
  Module,
  Req,
  Res,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
  type DynamicModule,
  type ExecutionContext,
  type INestApplication,
  type LoggerService,
  type NestApplicationOptions,
  type Provider,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory, type AbstractHttpAdapter } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { of, type Observable } from 'rxjs';
import { SubscriptionHub, toServerCapabilities, type SubscriptionCapabilities } from 'mcp-subscriptions';
import {
  McpSubscriptionsModule,
  type McpSubscriptionsModuleAsyncOptions,
  type McpSubscriptionsModuleOptions,
} from 'mcp-subscriptions/nest';

/** Tokens of the test apps, by principal. */
export const USERS: Readonly<Record<string, string>> = Object.freeze({ 'alice-token': 'alice', 'bob-token': 'bob' });

/** What a guard saw, one entry per call. */
export interface GuardCall {
  readonly guard: string;
  readonly className: string;
  readonly handlerName: string;
  readonly method: unknown;
  readonly uri: unknown;
  readonly id: unknown;
  readonly user: unknown;
  readonly mcpMethod: unknown;
  readonly mcpName: unknown;
  readonly authorization: unknown;
}

/** Every guard call of one app, in order. */
export const GUARD_LOG = Symbol('GUARD_LOG');

@Global()
@Module({})
export class GuardLogModule {
  static register(log: GuardCall[]): DynamicModule {
    return { module: GuardLogModule, providers: [{ provide: GUARD_LOG, useValue: log }], exports: [GUARD_LOG] };
  }
}

type HttpRequest = { headers: Record<string, string | string[] | undefined>; body?: any; user?: any };

/** A response as a route or guard gets it: Node's (Nest's Express platform) or Fastify's reply, whose `raw` is Node's. */
type HttpResponse =
  ServerResponse | { readonly raw: ServerResponse; header(name: string, value: string): unknown; hijack(): unknown };

function setHeader(res: HttpResponse, name: string, value: string): void {
  if ('raw' in res) res.header(name, value);
  else res.setHeader(name, value);
}

/** Node's response of a route, taken over from Fastify (which must not answer after the handler) where Fastify's. */
function nodeResponse(res: HttpResponse): ServerResponse {
  if (!('raw' in res)) return res;
  res.hijack();
  return res.raw;
}

function record(log: GuardCall[], guard: string, context: ExecutionContext): HttpRequest {
  const req = context.switchToHttp().getRequest<HttpRequest>();
  log.push({
    guard,
    className: context.getClass().name,
    handlerName: context.getHandler().name,
    method: req.body?.method,
    uri: req.body?.params?.uri,
    id: req.body?.id,
    user: req.user?.id,
    mcpMethod: req.headers['mcp-method'],
    mcpName: req.headers['mcp-name'],
    authorization: req.headers.authorization,
  });
  return req;
}

/** The host's auth, global: `Authorization: Bearer <token>` or 401 with `WWW-Authenticate: Bearer`. */
@Injectable()
export class BearerGuard implements CanActivate {
  constructor(@Inject(GUARD_LOG) private readonly log: GuardCall[]) {}

  canActivate(context: ExecutionContext): boolean {
    const req = record(this.log, 'BearerGuard', context);
    const token = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
    const user = token === undefined ? undefined : USERS[token];
    if (user === undefined) {
      setHeader(context.switchToHttp().getResponse<HttpResponse>(), 'WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException({ error: 'unauthorized', message: 'Missing or unknown bearer token' });
    }
    req.user = { id: user };
    return true;
  }
}

/**
 * The host's read check for `resources/read`, in every shape a guard can answer: `note://<user>/…` is
 * readable (sync `true`); `note://shared/…` through a Promise; `note://stream/<user>` through an
 * Observable; `note://boom/…` throws a plain error (a broken check); anything else is refused with an
 * `HttpException`, and `note://false/…` with a plain `false`.
 */
@Injectable()
export class ReadGuard implements CanActivate {
  constructor(@Inject(GUARD_LOG) private readonly log: GuardCall[]) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> | Observable<boolean> {
    const req = record(this.log, 'ReadGuard', context);
    if (req.body?.method !== 'resources/read') return true;
    const uri = String(req.body.params?.uri);
    const user = String(req.user?.id);
    if (uri.startsWith('note://boom/')) throw new Error('the read check broke');
    if (uri.startsWith('note://shared/')) return Promise.resolve(true);
    if (uri.startsWith('note://stream/')) return of(uri === `note://stream/${user}`);
    if (uri.startsWith('note://false/')) return false;
    if (uri.startsWith(`note://${user}/`)) return true;
    throw new ForbiddenException('Not your note');
  }
}

/**
 * A rate limit as a global guard, in the manner of @nestjs/throttler's: it counts every request it
 * sees (recording each as `ThrottleGuard`) and refuses the one past `limit` with a 429 `HttpException`.
 * One count per app: each call makes a class of its own.
 */
export function throttleGuard(limit: number): Type<CanActivate> {
  @Injectable()
  class ThrottleGuard implements CanActivate {
    private seen = 0;

    constructor(@Inject(GUARD_LOG) private readonly log: GuardCall[]) {}

    canActivate(context: ExecutionContext): boolean {
      record(this.log, 'ThrottleGuard', context);
      this.seen++;
      if (this.seen > limit) throw new HttpException('ThrottlerException: Too Many Requests', 429);
      return true;
    }
  }
  return ThrottleGuard;
}

/** Echoes what reached it (method and body), so a test sees what the listen route passed on. */
@Controller('mcp')
@UseGuards(ReadGuard)
export class EchoMcpController {
  @All()
  handle(@Req() req: HttpRequest & { method: string }, @Res() reply: HttpResponse): void {
    const res = nodeResponse(reply);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ host: true, httpMethod: req.method, body: req.body ?? null }));
  }
}

/** The official SDK's handler, built with the hub as its bus, served from a controller. */
@Injectable()
export class SdkHandler {
  readonly node: ReturnType<typeof toNodeHandler>;
  readonly close: () => Promise<void>;

  constructor(@Inject(SubscriptionHub) hub: SubscriptionHub) {
    const offer: SubscriptionCapabilities = { toolsListChanged: true, resourceSubscriptions: true };
    const handler = createMcpHandler(
      () => {
        const server = new McpServer(
          { name: 'nest-test', version: '0.0.0' },
          { capabilities: toServerCapabilities(offer) },
        );
        server.registerTool('ping', { description: 'Answers pong.' }, () => ({
          content: [{ type: 'text', text: 'pong' }],
        }));
        return server;
      },
      { bus: hub, legacy: 'reject' },
    );
    this.node = toNodeHandler(handler);
    this.close = () => handler.close();
  }
}

@Controller('mcp')
@UseGuards(ReadGuard)
export class SdkMcpController {
  constructor(@Inject(SdkHandler) private readonly sdk: SdkHandler) {}

  @All()
  handle(@Req() req: HttpRequest & { raw?: unknown }, @Res() res: HttpResponse): Promise<void> {
    return this.sdk.node((req.raw ?? req) as never, nodeResponse(res), req.body);
  }
}

/** How a test app is put together. */
export interface NestAppInit {
  /** `forRoot()` options (the default), or `forRootAsync()` ones. */
  readonly module?: Partial<McpSubscriptionsModuleOptions> | { readonly async: McpSubscriptionsModuleAsyncOptions };
  /** What serves the rest of MCP on `/mcp`. @default 'echo' */
  readonly host?: 'echo' | 'sdk' | 'none';
  readonly appOptions?: NestApplicationOptions;
  /** `app.setGlobalPrefix(prefix)`. */
  readonly prefix?: string;
  /** Runs before `listen()`. */
  readonly configure?: (app: NestExpressApplication) => void;
  readonly providers?: Provider[];
  /** Modules the app imports after `McpSubscriptionsModule`. */
  readonly imports?: Type<unknown>[];
  /** The HTTP adapter to build the app on. @default Nest's Express adapter */
  readonly adapter?: AbstractHttpAdapter;
}

/** A listening test app. */
export interface NestTestApp {
  readonly app: INestApplication;
  readonly hub: SubscriptionHub;
  /** `http://127.0.0.1:PORT`. */
  readonly baseUrl: string;
  /** `http://127.0.0.1:PORT/mcp` (under the global prefix, when one is set). */
  readonly url: string;
  readonly guardCalls: GuardCall[];
  /** `app.close()`; idempotent. */
  close(): Promise<void>;
}

/** The module options every test starts from: list changes and resource subscriptions, no keepalive. */
export const BASE_OPTIONS: McpSubscriptionsModuleOptions = Object.freeze({
  capabilities: { toolsListChanged: true, resourceSubscriptions: true },
  guards: [ReadGuard],
  keepAliveMs: false,
});

/** Builds a test app, listens on 127.0.0.1:0 and resolves once it accepts connections. */
export async function startNestApp(init: NestAppInit = {}): Promise<NestTestApp> {
  const guardCalls: GuardCall[] = [];
  const host = init.host ?? 'echo';
  const subscriptions =
    init.module !== undefined && 'async' in init.module
      ? McpSubscriptionsModule.forRootAsync(init.module.async)
      : McpSubscriptionsModule.forRoot({ ...BASE_OPTIONS, ...init.module });

  @Module({
    imports: [GuardLogModule.register(guardCalls), subscriptions, ...(init.imports ?? [])],
    controllers: host === 'echo' ? [EchoMcpController] : host === 'sdk' ? [SdkMcpController] : [],
    providers: [
      { provide: APP_GUARD, useClass: BearerGuard },
      ...(host === 'sdk' ? [SdkHandler] : []),
      ...(init.providers ?? []),
    ],
  })
  class AppModule {}

  const appOptions: NestApplicationOptions = { logger: false, abortOnError: false, ...init.appOptions };
  const app =
    init.adapter === undefined
      ? await NestFactory.create<NestExpressApplication>(AppModule, appOptions)
      : await NestFactory.create<NestExpressApplication>(AppModule, init.adapter, appOptions);
  if (init.prefix !== undefined) app.setGlobalPrefix(init.prefix);
  init.configure?.(app);
  try {
    await app.listen(0, '127.0.0.1');
  } catch (error) {
    // An app that failed to start is closed here: the test only sees the error.
    await app.close();
    throw error;
  }
  const baseUrl = await app.getUrl();
  const prefix = init.prefix ?? '';
  let closing: Promise<void> | undefined;
  return {
    app,
    hub: app.get(SubscriptionHub),
    baseUrl,
    url: `${baseUrl}${prefix === '' ? '' : `/${prefix}`}/mcp`,
    guardCalls,
    close: () =>
      (closing ??= (async () => {
        if (host === 'sdk') await app.get(SdkHandler).close();
        await app.close();
      })()),
  };
}

// The Nest suites import it from here, beside the apps that read it.
export { bearer } from './bearer.ts';

/** A Nest logger that keeps the warnings and errors it is given (the module's, among others), with their level. */
export function warningsLogger(): LoggerService & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    log: () => {},
    error: (message: unknown) => void lines.push(`error: ${String(message)}`),
    warn: (message: unknown) => void lines.push(`warn: ${String(message)}`),
  };
}

/** Nest's own line once `init()` is done ("Nest application successfully started"). */
export const NEST_STARTED = /Nest application successfully started/;

/** A Nest logger that keeps every line it is given, in order, with its level: to see what came before what. */
export function recordingLogger(): LoggerService & { lines: string[] } {
  const lines: string[] = [];
  const keep = (level: string) => (message: unknown) => void lines.push(`${level}: ${String(message)}`);
  return {
    lines,
    log: keep('log'),
    error: keep('error'),
    warn: keep('warn'),
    debug: keep('debug'),
    verbose: keep('verbose'),
  };
}
