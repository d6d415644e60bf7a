/**
 * The Nest sample: a small notes service with its own bearer auth (a global guard), REST API and MCP
 * server (the official SDK behind a controller), to which `McpSubscriptionsModule` adds
 * `subscriptions/listen`. It serves the sample apps' contract, the same one the Express sample serves,
 * on Nest's Express or Fastify platform; `main.ts` starts it.
 */
import { Inject, Module, type DynamicModule, type MiddlewareConsumer, type NestModule } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, HttpAdapterHost } from '@nestjs/core';
import { McpSubscriptionsModule } from 'mcp-subscriptions/nest';
import type { SampleConfig } from '../shared/config.ts';
import { sampleHubOptions } from '../shared/bus.ts';
import { offer } from '../shared/offer.ts';
import { CatalogController, NotesController, StatsController, TasksController } from './api.controllers.ts';
import { BearerAuthGuard } from './bearer-auth.guard.ts';
import { MCP_PATH, SAMPLE_CONFIG, SampleBusProvider, SampleConfigModule, SERVER_INFO } from './config.ts';
import { AppExceptionFilter } from './http-exception.filter.ts';
import { JsonBodyMiddleware } from './json-body.middleware.ts';
import { McpController, McpHandler } from './mcp.controller.ts';
import { NoteReadGuard } from './note-read.guard.ts';
import { NoteSubscribeHook, ServicesModule, TaskAccessCheck } from './services.module.ts';

@Module({})
export class AppModule implements NestModule {
  constructor(@Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost) {}

  /** The app for `config` (see `loadConfig()` in the shared config). */
  static register(config: SampleConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        SampleConfigModule.register(config),
        McpSubscriptionsModule.forRootAsync({
          path: MCP_PATH,
          // The guards of the MCP route (the global bearer guard applies anyway): listen passes them as
          // the MCP route does, and each requested URI is admitted only if they let a resources/read of
          // it through. NoteReadGuard is the app's read check; nothing else decides.
          guards: [NoteReadGuard],
          inject: [SAMPLE_CONFIG, SampleBusProvider],
          useFactory: (settings: SampleConfig, { sample }: SampleBusProvider) => ({
            capabilities: offer,
            hub: sampleHubOptions(settings, sample.bus),
            // Providers, resolved by token once the app is up: they depend on services that inject the hub.
            handleSubscribeResource: { useExisting: NoteSubscribeHook },
            canAccessTask: { useExisting: TaskAccessCheck },
            keepAliveMs: settings.keepAliveMs,
            serverInfo: SERVER_INFO,
          }),
        }),
        ServicesModule,
      ],
      controllers: [McpController, NotesController, CatalogController, TasksController, StatsController],
      providers: [
        McpHandler,
        { provide: APP_GUARD, useClass: BearerAuthGuard },
        { provide: APP_FILTER, useClass: AppExceptionFilter },
      ],
    };
  }

  /** On Express, JSON bodies for the REST routes that take one; on Fastify, Fastify parses them (fastify-json-body.ts). */
  configure(consumer: MiddlewareConsumer): void {
    if (this.adapterHost.httpAdapter.getType() !== 'express') return;
    consumer.apply(JsonBodyMiddleware).forRoutes(NotesController, TasksController);
  }
}
