/**
 * The chaos run's Redis: a redis-server of its own on a free loopback port in a temporary directory,
 * which it can `kill -9` and start again on the same port; the channel names of the bus, computed
 * from the rule in adapters/redis/redis-bus.ts (the harness judges the bus from outside, so it does
 * not import it); and `CLIENT LIST` read per connection. Commands go through test/helpers' few lines
 * of RESP, so that what the harness sees never depends on the client library under test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../test/helpers/free-port.ts';
import { redisCommand, type RespReply } from '../../test/helpers/redis-cluster.ts';
import type { Key } from './schedule.ts';

/** The samples' channel prefix (sample-app/shared/bus.ts); the harness checks it at start (see `checkPrefix`). */
export const SAMPLE_PREFIX = 'mcp-subscriptions-sample';

/** A key's digest in a channel name: 22 base64url characters of its SHA-256, as the bus computes it. */
function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}

/** The channel of a pool key (`list:<kind>` or a note URI), with interest routing. */
export function keyChannel(key: Key, prefix = SAMPLE_PREFIX): string {
  if (key.startsWith('list:')) return `${prefix}:2:l:${key.slice('list:'.length)}`;
  return `${prefix}:2:u:${digest(`u:${key}`)}`;
}

/** The channel of a principal's cancellations, which a node holds while it has a stream of that principal. */
export function cancelChannel(principal: string, prefix = SAMPLE_PREFIX): string {
  return `${prefix}:2:c:${digest(`c:${principal}`)}`;
}

/**
 * The channels every node holds whatever its streams follow: on a single Redis the first release's
 * channel, the presence channel and the resync channel; on a cluster the resync channel alone.
 */
export function fixedChannels(single: boolean, prefix = SAMPLE_PREFIX): string[] {
  const resync = `${prefix}:2:resync`;
  return single ? [`${prefix}:bus`, `${prefix}:2:nodes:interest`, resync] : [resync];
}

/** One connection of `CLIENT LIST`. */
export interface ClientInfo {
  readonly id: string;
  readonly name: string;
  /** Channels, patterns and shard channels it is subscribed to. */
  readonly sub: number;
  readonly psub: number;
  readonly ssub: number;
}

export function parseClientList(text: string): ClientInfo[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields = new Map<string, string>();
      for (const pair of line.trim().split(' ')) {
        const at = pair.indexOf('=');
        if (at > 0) fields.set(pair.slice(0, at), pair.slice(at + 1));
      }
      return {
        id: fields.get('id') ?? '',
        name: fields.get('name') ?? '',
        sub: Number(fields.get('sub') ?? 0),
        psub: Number(fields.get('psub') ?? 0),
        ssub: Number(fields.get('ssub') ?? 0),
      };
    });
}

/** A command that must succeed. */
export async function must(port: number, args: readonly string[], timeoutMs = 5000): Promise<RespReply> {
  const reply = await redisCommand(port, args, timeoutMs);
  if (reply instanceof Error) throw new Error(`${args.join(' ')} on port ${port}: ${reply.message}`);
  return reply;
}

export async function clientList(port: number): Promise<ClientInfo[]> {
  return parseClientList(String(await must(port, ['CLIENT', 'LIST'])));
}

/** A redis-server of the run's own: `kill()` is `kill -9`, `start()` starts it again on the same port. */
export class RedisProcess {
  private child: ChildProcess | undefined;
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-subscriptions-chaos-'));

  private constructor(readonly port: number) {}

  static async start(): Promise<RedisProcess> {
    // A port found free may be taken before redis-server binds it: try a few.
    for (let attempt = 0; attempt < 5; attempt++) {
      const redis = new RedisProcess(await freePort());
      if (
        await redis.start().then(
          () => true,
          () => false,
        )
      )
        return redis;
      redis.remove();
    }
    throw new Error('could not start a redis-server on a free loopback port');
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no'],
      { cwd: this.dir, stdio: 'ignore' },
    );
    this.child = child;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited at start on port ${this.port}`);
      try {
        if ((await redisCommand(this.port, ['PING'], 500)) === 'PONG') return;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`redis-server did not answer on port ${this.port}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** `kill -9`: a crash, every connection reset, every subscription gone. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  private remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  async stop(): Promise<void> {
    await this.kill();
    this.remove();
  }
}
