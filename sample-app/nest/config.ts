/**
 * The sample's configuration as a provider: read from the environment once, in `main.ts`, with the
 * loader both samples share, and injected wherever it is needed.
 */
import { Inject, Injectable, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { createSampleBus, type SampleBus } from '../shared/bus.ts';
import { oneOfVariable, type SampleConfig } from '../shared/config.ts';

/** Injection token of the {@link SampleConfig}. */
export const SAMPLE_CONFIG = Symbol('SAMPLE_CONFIG');

/** The MCP path (the contract's `POST /mcp`). */
export const MCP_PATH = '/mcp';

/** The server's identity: in `server/discover` results and in the terminal result of listen streams. */
export const SERVER_INFO = Object.freeze({ name: 'mcp-subscriptions-nest-sample', version: '0.1.0' });

/** Nest's HTTP platforms the sample runs on (`NEST_PLATFORM`). */
export const NEST_PLATFORMS = ['express', 'fastify'] as const;

/** An HTTP platform of Nest: `@nestjs/platform-express` or `@nestjs/platform-fastify`. */
export type NestPlatform = (typeof NEST_PLATFORMS)[number];

/**
 * The platform `NEST_PLATFORM` names, `express` when unset. Throws a `ConfigError` naming
 * `NEST_PLATFORM` for any other value (the Nest sample's one variable of its own).
 */
export function nestPlatformOf(env: Readonly<Record<string, string | undefined>> = process.env): NestPlatform {
  return oneOfVariable(env, 'NEST_PLATFORM', NEST_PLATFORMS, 'express');
}

/**
 * The bus the hub is built with (Redis when `REDIS_URL` or `REDIS_CLUSTER` is set, PostgreSQL when `DATABASE_URL` is). Closed on application shutdown, which
 * Nest runs after every `beforeApplicationShutdown` hook, so after the module has closed the hub.
 */
@Injectable()
export class SampleBusProvider implements OnApplicationShutdown {
  readonly sample: SampleBus;

  constructor(@Inject(SAMPLE_CONFIG) config: SampleConfig) {
    this.sample = createSampleBus(config);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.sample.close();
  }
}

/** Provides {@link SAMPLE_CONFIG} and the {@link SampleBusProvider} to every module. */
@Module({})
export class SampleConfigModule {
  static register(config: SampleConfig): DynamicModule {
    return {
      module: SampleConfigModule,
      global: true,
      providers: [{ provide: SAMPLE_CONFIG, useValue: config }, SampleBusProvider],
      exports: [SAMPLE_CONFIG, SampleBusProvider],
    };
  }
}
