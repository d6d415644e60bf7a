/**
 * The sample's configuration as a provider: read from the environment once, in `main.ts`, with the
 * loader both samples share, and injected wherever it is needed.
 */
import { Module, type DynamicModule } from '@nestjs/common';
import type { SampleConfig } from '../shared/config.ts';

/** Injection token of the {@link SampleConfig}. */
export const SAMPLE_CONFIG = Symbol('SAMPLE_CONFIG');

/** The MCP path (the contract's `POST /mcp`). */
export const MCP_PATH = '/mcp';

/** The server's identity: in `server/discover` results and in the terminal result of listen streams. */
export const SERVER_INFO = Object.freeze({ name: 'mcp-subscriptions-nest-sample', version: '0.1.0' });

/** Provides {@link SAMPLE_CONFIG} to every module. */
@Module({})
export class SampleConfigModule {
  static register(config: SampleConfig): DynamicModule {
    return {
      module: SampleConfigModule,
      global: true,
      providers: [{ provide: SAMPLE_CONFIG, useValue: config }],
      exports: [SAMPLE_CONFIG],
    };
  }
}
