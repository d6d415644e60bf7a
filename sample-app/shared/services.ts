/**
 * The host's services as the Express and Fastify samples build them (the Nest sample makes the same ones
 * providers): the hub, bridged over Redis when configured, the notes, tasks and catalog services that
 * publish to it, THE read check, and the SDK's MCP handler with the hub as its bus.
 */
import type { McpHttpHandler } from '@modelcontextprotocol/server';
import { SubscriptionHub } from 'mcp-subscriptions';
import { createSampleBus, sampleHubOptions, type SampleBus } from './bus.ts';
import { CatalogService } from './catalog-service.ts';
import type { SampleConfig } from './config.ts';
import { createNotesMcpHandler, type ReadCheck } from './mcp-server.ts';
import { canRead, NotesService } from './notes-service.ts';
import { TasksService } from './tasks-service.ts';

/** What {@link createSampleServices} builds. */
export interface SampleServices {
  readonly sampleBus: SampleBus;
  readonly hub: SubscriptionHub;
  readonly notes: NotesService;
  readonly tasks: TasksService;
  readonly catalog: CatalogService;
  /** THE read check: listen's per-URI check and the SDK's `resources/read` both call this very function. */
  readonly readCheck: ReadCheck;
  /** The SDK's handler for the rest of MCP; the hub is its event bus, so its `notify.*` reaches listen streams. */
  readonly mcpHandler: McpHttpHandler;
}

/** `serverInfo`: the sample's own name, which the SDK's handler and listen's terminal result both give. */
export function createSampleServices(
  settings: SampleConfig,
  serverInfo: { readonly name: string; readonly version: string },
): SampleServices {
  const sampleBus = createSampleBus(settings);
  const hub = new SubscriptionHub(sampleHubOptions(settings, sampleBus.bus));
  const notes = new NotesService(hub);
  const readCheck: ReadCheck = (uri, { principal: caller }) => canRead(caller, uri);
  const mcpHandler = createNotesMcpHandler({
    notes,
    canRead: readCheck,
    hub,
    conformance: settings.conformance,
    serverInfo,
    keepAliveMs: settings.keepAliveMs,
  });
  return {
    sampleBus,
    hub,
    notes,
    tasks: new TasksService(hub),
    catalog: new CatalogService(hub),
    readCheck,
    mcpHandler,
  };
}
