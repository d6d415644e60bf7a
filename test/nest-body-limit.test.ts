/**
 * A body over `maxBodyBytes` on the Nest module (same request handling as Express), over a real
 * socket: the 413 reaches the client while it is still sending, and the rest is never read.
 */
import type http from 'node:http';
import { afterEach, describe, it } from '@jest/globals';
import { startNestApp, type NestTestApp } from './helpers/nest-apps.ts';
import { countBytesRead, expectRefusedUnread, sendHugeBody } from './helpers/huge-body.ts';

const LIMIT = 64 * 1024;
const SLACK = 256 * 1024;
const apps: NestTestApp[] = [];

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

describe('Nest: a body over maxBodyBytes on a real socket', () => {
  for (const framing of ['chunked', 'content-length'] as const) {
    it(`${framing}: 413 with Connection: close while the client still sends; the rest is never read`, async () => {
      const app = await startNestApp({ module: { maxBodyBytes: LIMIT }, appOptions: { bodyParser: false } });
      apps.push(app);
      const bytesRead = countBytesRead(app.app.getHttpServer() as http.Server);
      const outcome = await sendHugeBody(app.url, framing, { Authorization: 'Bearer alice-token' });
      expectRefusedUnread(outcome, bytesRead(), LIMIT, SLACK);
    });
  }
});
