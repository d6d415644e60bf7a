/**
 * Runs the route's own guards (the module's `guards`) on a read probe, without the global ones: Nest's
 * guard pipeline always prepends the global guards, and those already ran once on the listen request.
 */
import type { ServerResponse } from 'node:http';
import type { CanActivate, ExecutionContext, Type } from '@nestjs/common';
import { isObservable, lastValueFrom } from 'rxjs';
import type { McpRequest } from './mcp-subscriptions.interfaces.ts';

type Next = (error?: unknown) => void;

/**
 * The HTTP execution context Nest builds for a route, for the probe: `getClass()`/`getHandler()` name
 * the read context and its `resourcesRead`, so `Reflector` metadata on them reads as on a route.
 */
function httpContext(
  args: [McpRequest, ServerResponse, Next],
  classRef: Type<unknown>,
  handler: (...args: never[]) => unknown,
): ExecutionContext {
  const [request, response, next] = args;
  const unsupported = (kind: string) => (): never => {
    throw new Error(`a read probe is an HTTP request, not ${kind}`);
  };
  return {
    getClass: <T>() => classRef as Type<T>,
    getHandler: () => handler,
    getArgs: <T extends unknown[]>() => args as unknown as T,
    getArgByIndex: <T>(index: number) => args[index] as T,
    getType: <T extends string>() => 'http' as T,
    switchToHttp: () => ({
      getRequest: <T>() => request as T,
      getResponse: <T>() => response as T,
      getNext: <T>() => next as T,
    }),
    switchToRpc: unsupported('an RPC message'),
    switchToWs: unsupported('a WebSocket message'),
  };
}

/**
 * Runs `guards` in order as Nest's guard consumer does: a `false` (sync, Promise or the last value of
 * an Observable) ends the run with `false`; a throw or rejection propagates.
 */
export async function runRouteGuards(
  guards: readonly CanActivate[],
  args: [McpRequest, ServerResponse, Next],
  classRef: Type<unknown>,
  handler: (...args: never[]) => unknown,
): Promise<boolean> {
  if (guards.length === 0) return true;
  const context = httpContext(args, classRef, handler);
  for (const guard of guards) {
    const result: unknown = await guard.canActivate(context);
    const value: unknown = isObservable(result) ? await lastValueFrom(result) : result;
    if (!value) return false;
  }
  return true;
}
