/**
 * Puts the listen route in front of the host's MCP route on Nest's Express adapter.
 *
 * Nest registers controller routes module by module, the root module first, so a host's MCP controller
 * in `AppModule` would be registered before this module's listen route and serve listen itself. Once
 * every route is registered (before `onModuleInit`), the module moves its route just before the first
 * other controller route for the same path. It never moves before what is not a controller route
 * (`app.use()` middleware, body parsers, a handler mounted on the adapter directly): those run before
 * every controller route by design, and one that serves `POST <path>` is reported instead.
 */
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { MCP_SUBSCRIPTIONS_ROUTE } from './mcp-subscriptions.constants.ts';

/** The parts of an Express (router 1/2) layer this module reads. */
interface Layer {
  readonly route?: { readonly path?: unknown; readonly methods?: Record<string, boolean>; readonly stack?: Layer[] };
  readonly handle?: unknown;
}

/** What {@link placeListenRoute} did. */
export interface RoutePlacement {
  /** The listen route was found in the router. */
  readonly found: boolean;
  /** Its path, as the router has it (with the global prefix), when found. */
  readonly path: string | undefined;
  /** It was moved in front of this many controller routes for the same path. */
  readonly movedBefore: number;
  /** Handlers for `POST <path>` outside Nest's routing, ahead of every controller route (see the module doc). */
  readonly shadowedBy: number;
}

function routerStack(app: unknown): Layer[] | undefined {
  const express = app as { router?: { stack?: unknown }; _router?: { stack?: unknown } } | undefined;
  // Express 5 exposes `app.router`; Express 4 keeps it as `app._router`.
  const stack = express?.router?.stack ?? express?._router?.stack;
  return Array.isArray(stack) ? (stack as Layer[]) : undefined;
}

function handlesOf(layer: Layer): unknown[] {
  return (layer.route?.stack ?? []).map((inner) => inner.handle);
}

function hasMetadata(key: string, target: unknown): boolean {
  return typeof target === 'function' && Reflect.hasMetadata(key, target);
}

function servesPost(layer: Layer, path: unknown): boolean {
  const methods = layer.route?.methods ?? {};
  return layer.route?.path === path && (methods['post'] === true || methods['_all'] === true);
}

/**
 * Moves the listen route in front of every other controller route for its path, in the router of
 * `app` (an Express application). Safe to call on any other platform: it then finds nothing.
 */
export function placeListenRoute(app: unknown): RoutePlacement {
  const stack = routerStack(app);
  const ours = stack?.findIndex((layer) => handlesOf(layer).some((h) => hasMetadata(MCP_SUBSCRIPTIONS_ROUTE, h)));
  if (stack === undefined || ours === undefined || ours < 0)
    return { found: false, path: undefined, movedBefore: 0, shadowedBy: 0 };
  const path = stack[ours]?.route?.path;
  const isController = (layer: Layer): boolean =>
    handlesOf(layer).some((h) => hasMetadata(PATH_METADATA, h) && hasMetadata(METHOD_METADATA, h));
  let first = -1;
  let movedBefore = 0;
  let shadowedBy = 0;
  for (let i = 0; i < ours; i++) {
    const layer = stack[i] as Layer;
    if (!servesPost(layer, path)) continue;
    if (isController(layer)) {
      if (first < 0) first = i;
      movedBefore++;
    } else if (first < 0) {
      shadowedBy++;
    }
  }
  if (first >= 0) {
    const [listen] = stack.splice(ours, 1);
    stack.splice(first, 0, listen as Layer);
  }
  return { found: true, path: typeof path === 'string' ? path : undefined, movedBefore, shadowedBy };
}
