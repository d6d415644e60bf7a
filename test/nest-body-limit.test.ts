/**
 * A body over `maxBodyBytes` on the Nest module (same request handling as Express), over a real
 * socket: the 413 reaches the client while it is still sending, and the rest is never read.
 */
import type http from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import { startNestApp, type NestTestApp } from './helpers/nest-apps.ts';
import { countBytesRead, HUGE_BODY_BYTES, sendHugeBody } from './helpers/huge-body.ts';

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
      const { response, sent } = await sendHugeBody(app.url, framing, { Authorization: 'Bearer alice-token' });
      expect(response.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
      expect(response.toLowerCase()).toContain('\r\nconnection: close\r\n');
      expect(response).toContain('"code":-32600');
      expect(sent).toBeLessThan(HUGE_BODY_BYTES);
      const serverRead = bytesRead();
      expect({ serverRead, sent, withinLimit: serverRead <= LIMIT + SLACK }).toStrictEqual({
        serverRead,
        sent,
        withinLimit: true,
      });
    });
  }
});
