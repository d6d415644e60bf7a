/**
 * The host's services, shared with the Express sample, as Nest providers: each is built with the
 * `SubscriptionHub` that `McpSubscriptionsModule` provides, and publishes its events through it. Also
 * the two hooks the listen module resolves by token: the subscribe hook and the task check.
 */
import { Global, Inject, Injectable, Module } from '@nestjs/common';
import type { McpCheckContext, McpSubscribeResourceHandler, McpTaskAccessCheck } from 'mcp-subscriptions/nest';
import { SubscriptionHub } from 'mcp-subscriptions/nest';
import { CatalogService } from '../shared/catalog-service.ts';
import { acceptsSubscription, NotesService } from '../shared/notes-service.ts';
import { TasksService } from '../shared/tasks-service.ts';

/** The subscribe hook: this app watches `note://` URIs only (the shared rule). */
@Injectable()
export class NoteSubscribeHook implements McpSubscribeResourceHandler {
  handleSubscribeResource(uri: string): boolean {
    return acceptsSubscription(uri);
  }
}

/** The Tasks extension's check: does the caller own the task? An unknown and a foreign id answer alike. */
@Injectable()
export class TaskAccessCheck implements McpTaskAccessCheck {
  constructor(@Inject(TasksService) private readonly tasks: TasksService) {}

  canAccessTask(taskId: string, { principal }: McpCheckContext): boolean {
    return this.tasks.isOwner(taskId, principal);
  }
}

@Global()
@Module({
  providers: [
    { provide: NotesService, useFactory: (hub: SubscriptionHub) => new NotesService(hub), inject: [SubscriptionHub] },
    { provide: TasksService, useFactory: (hub: SubscriptionHub) => new TasksService(hub), inject: [SubscriptionHub] },
    {
      provide: CatalogService,
      useFactory: (hub: SubscriptionHub) => new CatalogService(hub),
      inject: [SubscriptionHub],
    },
    NoteSubscribeHook,
    TaskAccessCheck,
  ],
  exports: [NotesService, TasksService, CatalogService],
})
export class ServicesModule {}
