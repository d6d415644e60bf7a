/**
 * The app: a global bearer guard, the SDK's MCP handler behind a controller, a notes REST route, and
 * McpSubscriptionsModule adding `subscriptions/listen` on `/mcp` in front of that controller.
 */
import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { McpSubscriptionsModule } from 'mcp-subscriptions/nest';
import { AuthGuard } from './auth.guard';
import { McpController } from './mcp.controller';
import { offer } from './mcp-server';
import { NoteReadGuard } from './note-read.guard';
import { NotesController } from './notes.controller';
import { NotesService } from './notes.service';

@Module({
  imports: [
    McpSubscriptionsModule.forRoot({
      capabilities: offer,
      // The guards of the MCP route (the global AuthGuard applies anyway). Each URI a listen asks for
      // is admitted only if they let a resources/read of it through.
      guards: [NoteReadGuard],
    }),
  ],
  controllers: [McpController, NotesController],
  providers: [{ provide: APP_GUARD, useClass: AuthGuard }, NotesService],
})
export class AppModule {}
