/**
 * Real Redis for the Redis bus's tests: whether one answers, and servers of the test's own (spawned on
 * a free loopback port, killed and restarted to make outages) so that nothing ever touches the shared
 * server on 6379 beyond the channels a test names.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { freePort } from './free-port.ts';

export const REDIS_HOST = '127.0.0.1';
export const REDIS_PORT = 6379;
export const REDIS_URL = `redis://${REDIS_HOST}:${REDIS_PORT}`;

/** Whether a Redis on `host:port` answers PING within `timeoutMs`: a raw RESP exchange, no client library. */
export function pingRedis(port = REDIS_PORT, host = REDIS_HOST, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let reply = '';
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.on('error', () => done(false));
  });
}

/** Whether `redis-server` can be run here (to spawn servers of a test's own). */
export function redisServerInstalled(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Why the suites on the shared Redis (127.0.0.1:6379) cannot run here (it does not answer PING), or
 * `undefined` when they can. Decided once, at a suite file's load; pair it with `failUnderCi`.
 */
export async function sharedRedisMissing(): Promise<string | undefined> {
  return (await pingRedis())
    ? undefined
    : `Redis does not answer on ${REDIS_HOST}:${REDIS_PORT}; start one with \`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no\` to run these; CI never skips them`;
}

/**
 * Why the tests that spawn redis-servers of their own must skip here (`toRun` names them), or
 * `undefined`. Never under CI: there they run, and the missing server fails their setup (.ci/run
 * installs it).
 */
export function ownRedisSkipReason(toRun: string): string | undefined {
  return process.env.CI === undefined && !redisServerInstalled()
    ? `redis-server is not installed: apt-get install redis-server, or run .ci/run, to run ${toRun}`
    : undefined;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A redis-server of the test's own on a free loopback port, without persistence. `stop()` kills it
 * (SIGKILL: an outage, not a shutdown); `start()` again brings it back on the same port.
 */
export class OwnRedis {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<OwnRedis> {
    const server = new OwnRedis(await freePort());
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://${REDIS_HOST}:${this.port}`;
  }

  async start(): Promise<void> {
    if (this.child !== undefined) return;
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', REDIS_HOST, '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
      { stdio: 'ignore' },
    );
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    await until(() => pingRedis(this.port), `redis-server on port ${this.port}`, 10_000);
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    this.child = undefined;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
  }
}
