/**
 * A body over `maxBodyBytes`, over a real socket on Express 5 and Express 4: the 413 reaches the
 * client while it is still sending, the connection is closed, and the server never reads the rest
 * of the body (it reads about the limit, not what the client goes on sending).
 */
import { describe, test } from '@jest/globals';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { expressFlavours, listenOn } from './helpers/express-apps.ts';
import { recordingLogger } from './helpers/fake-response.ts';
import { countBytesRead, expectRefusedUnread, sendHugeBody } from './helpers/huge-body.ts';

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
