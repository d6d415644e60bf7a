/**
 * The Nest application on the HTTP platform `NEST_PLATFORM` names: what differs between Nest's Express
 * and Fastify platforms when the app is created, in one place. Everything else of the sample is
 * platform-neutral (the exception filter answers through Nest's `HttpAdapterHost`).
 */
import type { DynamicModule, INestApplication, NestApplicationOptions } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { MAX_PARAM_LENGTH } from '../shared/validation.ts';
import { MCP_PATH, type NestPlatform } from './config.ts';
import { useFastifyJsonBodies } from './fastify-json-body.ts';

/**
 * Creates the app on `platform`. Nest's own body parsers stay off on both: on Express the MCP path is
 * parsed after the guards (by the listen route) and the REST routes have their own parser
 * (`JsonBodyMiddleware`); on Fastify, Fastify's JSON parser serves, told how to treat a body that is
 * not JSON (`useFastifyJsonBodies()`). Only the chosen platform's package is loaded.
 */
export async function createNestApp(
  platform: NestPlatform,
  module: DynamicModule,
  options: Omit<NestApplicationOptions, 'bodyParser'>,
): Promise<INestApplication> {
  if (platform === 'fastify') {
    const { FastifyAdapter } = await import('@nestjs/platform-fastify');
    // A note name of 128 characters is routed, and a longer one refused by the notes service with 400
    // rather than by Fastify's router with 414 (its default `maxParamLength` is 100).
    const adapter = new FastifyAdapter({ routerOptions: { maxParamLength: MAX_PARAM_LENGTH } });
    const app = await NestFactory.create<NestFastifyApplication>(module, adapter, {
      ...options,
      bodyParser: false,
    });
    // Fastify sends no X-Powered-By.
    useFastifyJsonBodies(app.getHttpAdapter().getInstance(), MCP_PATH);
    return app;
  }
  const app = await NestFactory.create<NestExpressApplication>(module, { ...options, bodyParser: false });
  app.disable('x-powered-by');
  return app;
}
