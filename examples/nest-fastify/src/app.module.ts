import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { McpSubscriptionsModule, SubscriptionHub } from 'mcp-subscriptions/nest';
import { AuthGuard } from './auth.guard.ts';
import { McpController } from './mcp.controller.ts';
import { offer } from './mcp-server.ts';
import { NotesController } from './notes.controller.ts';
import { canRead, NotesService } from './notes.ts';

@Module({
  // Serves listen on /mcp, checking each URI with the read rule of resources/read; provides SubscriptionHub.
  imports: [McpSubscriptionsModule.forRoot({ capabilities: offer, canRead })],
  controllers: [McpController, NotesController],
  providers: [
    { provide: APP_GUARD, useClass: AuthGuard }, // global, so it runs before the listen route too
    { provide: NotesService, inject: [SubscriptionHub], useFactory: (hub: SubscriptionHub) => new NotesService(hub) },
  ],
})
export class AppModule {}
