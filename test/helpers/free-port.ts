/** A loopback port for a process of the test's own (a sample, a redis-server) to listen on. */
import { createServer, type AddressInfo } from 'node:net';

/**
 * A TCP port free on 127.0.0.1 right now: bound, read and released. Nothing listens there once it
 * resolves, which also makes it the port of a server that is gone (a refused connection).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
