/**
 * A body over `maxBodyBytes` on the Nest module (same request handling as Express), over a real
 * socket: the 413 reaches the client while it is still sending, and the rest is never read. And a
 * client that hangs up before its body is in, which is nobody's error.
 */
import { once } from 'node:events';
import type http from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { LoggerService } from '@nestjs/common';
import { startNestApp, type NestTestApp } from '../helpers/nest-apps.ts';
import { countBytesRead, expectRefusedUnread, sendHugeBody } from '../helpers/huge-body.ts';

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

describe('Nest: a client that hangs up before its body is in', () => {
  it("is no error of the app's: Nest's exception handling never sees it, no slot is held", async () => {
    const errors: unknown[][] = [];
    const logger: LoggerService = {
      log: () => {},
      warn: () => {},
      error: (...args: unknown[]) => void errors.push(args),
    };
    const app = await startNestApp({ appOptions: { bodyParser: false, logger } });
    apps.push(app);
    const server = app.app.getHttpServer() as http.Server;
    const closed = new Promise<void>((resolve) =>
      server.once('connection', (socket: Socket) => socket.once('close', () => resolve())),
    );
    const { port } = new URL(app.url);
    const client = connect(Number(port), '127.0.0.1');
    client.on('error', () => {});
    await once(client, 'connect');
    client.write(
      [
        'POST /mcp HTTP/1.1',
        'Host: 127.0.0.1',
        'Authorization: Bearer alice-token',
        'Content-Type: application/json',
        'Mcp-Method: subscriptions/listen',
        'Content-Length: 1000',
        '',
        '{"jsonrpc":"2.0","id"',
      ].join('\r\n'),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    client.destroy();
    await closed;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(errors).toStrictEqual([]);
    expect(app.hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0 });
  });
});
