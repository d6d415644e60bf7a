/**
 * A body over `maxBodyBytes`, over a real socket on Express 5 and Express 4: the 413 reaches the
 * client while it is still sending, the connection is closed, and the server never reads the rest
 * of the body (it reads about the limit, not what the client goes on sending). And a client that
 * hangs up before its body is in: nobody is left to answer, and that is nobody's error.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, expect, test } from '@jest/globals';
import type { ErrorRequestHandler } from 'express';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { expressFlavours, listenOn } from '../helpers/express-apps.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { countBytesRead, expectRefusedUnread, sendHugeBody } from '../helpers/huge-body.ts';
import { listen, listenBody } from '../helpers/sse.ts';

const LIMIT = 64 * 1024;
/** What the server may read beyond the limit: the chunk that crossed it, and a request's buffers. */
const SLACK = 256 * 1024;

for (const flavour of expressFlavours) {
  describe(`${flavour.name}: a body over maxBodyBytes on a real socket`, () => {
    for (const framing of ['chunked', 'content-length'] as const) {
      test(`${framing}: 413 with Connection: close while the client still sends; the rest is never read`, async () => {
        const hub = new SubscriptionHub({ logger: recordingLogger() });
        const app = flavour.express();
        app.post(
          '/mcp',
          mcpSubscriptions({ hub, capabilities: { toolsListChanged: true }, keepAliveMs: false, maxBodyBytes: LIMIT }),
        );
        const server = await listenOn(app);
        const bytesRead = countBytesRead(server.server);
        try {
          const outcome = await sendHugeBody(server.url, framing);
          expectRefusedUnread(outcome, bytesRead(), LIMIT, SLACK);
        } finally {
          await server.close();
          await hub.close();
        }
      });
    }
  });
}

for (const flavour of expressFlavours) {
  describe(`${flavour.name}: a client that hangs up before its body is in`, () => {
    for (const framing of ['chunked', 'content-length'] as const) {
      test(`${framing}: is no error of the host's; nothing reaches its error handler or the log, no slot is held`, async () => {
        const logger = recordingLogger();
        const hub = new SubscriptionHub({ logger });
        const app = flavour.express();
        const hostErrors: unknown[] = [];
        const onError: ErrorRequestHandler = (error, _req, res, _next) => {
          hostErrors.push(error);
          res.status(500).end();
        };
        app.post('/mcp', mcpSubscriptions({ hub, capabilities: { toolsListChanged: true }, keepAliveMs: false }));
        app.use(onError);
        const server = await listenOn(app);
        const closed = new Promise<void>((resolve) =>
          server.server.once('connection', (socket: Socket) => socket.once('close', () => resolve())),
        );
        try {
          const { port } = new URL(server.url);
          const client = connect(Number(port), '127.0.0.1');
          client.on('error', () => {});
          await once(client, 'connect');
          const head = JSON.stringify(listenBody('gone', { toolsListChanged: true })).slice(0, 20);
          client.write(
            [
              'POST /mcp HTTP/1.1',
              'Host: 127.0.0.1',
              'Content-Type: application/json',
              'Mcp-Method: subscriptions/listen',
              framing === 'chunked' ? 'Transfer-Encoding: chunked' : 'Content-Length: 1000',
              '',
              framing === 'chunked' ? `${head.length.toString(16)}\r\n${head}\r\n` : head,
            ].join('\r\n'),
          );
          await new Promise((resolve) => setTimeout(resolve, 50));
          client.destroy();
          await closed;
          await new Promise((resolve) => setTimeout(resolve, 20));
          expect({ hostErrors, loggedErrors: logger.errors }).toStrictEqual({ hostErrors: [], loggedErrors: [] });
          expect(hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0 });
          const next = await listen(server.url, 'next', { toolsListChanged: true });
          expect((await next.event(1)).json.params._meta).toStrictEqual({
            'io.modelcontextprotocol/subscriptionId': 'next',
          });
          next.close();
        } finally {
          await server.close();
          await hub.close();
        }
      });
    }
  });
}
