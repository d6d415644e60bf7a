/**
 * A body over `maxBodyBytes`, over a real socket on Express 5 and Express 4: the 413 reaches the
 * client while it is still sending, the connection is closed, and the server never reads the rest
 * of the body (it reads about the limit, not what the client goes on sending).
 */
import { describe, expect, test } from '@jest/globals';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { expressFlavours, listenOn } from './helpers/express-apps.ts';
import { recordingLogger } from './helpers/fake-response.ts';
import { countBytesRead, HUGE_BODY_BYTES, sendHugeBody } from './helpers/huge-body.ts';

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
          const { response, sent } = await sendHugeBody(server.url, framing);
          expect(response.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
          expect(response.toLowerCase()).toContain('\r\nconnection: close\r\n');
          expect(response).toContain('"code":-32600');
          // The server closed the connection while the client was still sending.
          expect(sent).toBeLessThan(HUGE_BODY_BYTES);
          // It read about the limit, not what the client went on sending (the numbers show on failure).
          const serverRead = bytesRead();
          expect({ serverRead, sent, withinLimit: serverRead <= LIMIT + SLACK }).toStrictEqual({
            serverRead,
            sent,
            withinLimit: true,
          });
        } finally {
          await server.close();
          await hub.close();
        }
      });
    }
  });
}
