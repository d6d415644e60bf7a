// The source of the `nest new` consumers of the packed package (test/system/package.test.ts writes it into
// their src/main.ts before compiling them there): a Nest 11 app whose service gets the hub injected by
// type, which takes the decorator metadata the compiler emits, started as an application context; it
// prints where the Nest entry was found and what was injected, as one JSON line, and closes.
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { McpSubscriptionsModule, SubscriptionHub } from 'mcp-subscriptions/nest';

@Injectable()
export class NotesService {
  constructor(readonly hub: SubscriptionHub) {}

  toolAdded(): void {
    this.hub.toolsListChanged();
  }
}

@Module({
  imports: [McpSubscriptionsModule.forRoot({ capabilities: { toolsListChanged: true }, keepAliveMs: false })],
  providers: [NotesService],
})
export class AppModule {}

// Never called: the module's options are the package's own types, not `any`, even without `strict`.
export function misuse() {
  // @ts-expect-error `keepAliveMs` is a number of milliseconds or `false`
  return McpSubscriptionsModule.forRoot({ capabilities: { toolsListChanged: true }, keepAliveMs: 'often' });
}

async function bootstrap() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const notes = app.get(NotesService);
  notes.toolAdded();
  console.log(
    JSON.stringify({
      resolved: require.resolve('mcp-subscriptions/nest'),
      injected: notes.hub instanceof SubscriptionHub && notes.hub === app.get(SubscriptionHub),
    }),
  );
  await app.close();
}
void bootstrap();
