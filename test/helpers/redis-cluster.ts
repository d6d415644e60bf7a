/**
 * A real Redis Cluster of the test's own, made of `redis-server` processes on free loopback ports in
 * 7000–7499 by default, or another range given to `start()` (their cluster bus on the port + 10000): 3 masters with a replica each, without
 * persistence, in a temporary directory. It talks to its nodes with a few lines of RESP of its own, so
 * that what it reports never depends on the client library under test.
 *
 * Every wait is bounded; `stop()` kills every node it started and removes the directory, whatever
 * state the cluster was left in (call it in `afterAll`, even after a failed `start()`).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { REDIS_HOST } from './redis.ts';

/** A Redis reply: a simple or bulk string, an integer, null, an error, or an array of those. */
export type RespReply = string | number | null | Error | RespReply[];

/** Parses one RESP2 reply at `at` of `buffer`; `undefined` when it is not all there yet. */
function parseReply(buffer: Buffer, at: number): { value: RespReply; next: number } | undefined {
  const end = buffer.indexOf('\r\n', at, 'latin1');
  if (end === -1) return undefined;
  const type = String.fromCharCode(buffer[at] as number);
  const line = buffer.toString('utf8', at + 1, end);
  switch (type) {
    case '+':
      return { value: line, next: end + 2 };
    case '-':
      return { value: new Error(line), next: end + 2 };
    case ':':
      return { value: Number(line), next: end + 2 };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, next: end + 2 };
      if (buffer.length < end + 2 + length + 2) return undefined;
      return { value: buffer.toString('utf8', end + 2, end + 2 + length), next: end + 2 + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next: end + 2 };
      const items: RespReply[] = [];
      let next = end + 2;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buffer, next);
        if (item === undefined) return undefined;
        items.push(item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new Error(`unexpected RESP type ${JSON.stringify(type)}`);
  }
}

/**
 * Sends one command to the server on `port` on a connection of its own and resolves with its reply
 * (a Redis error reply resolves as an `Error`); rejects when the server cannot be reached or does not
 * answer within `timeoutMs`.
 */
export function redisCommand(port: number, args: readonly string[], timeoutMs = 2000): Promise<RespReply> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: REDIS_HOST, port });
    let received = Buffer.alloc(0);
    const finish = (error: Error | undefined, value?: RespReply): void => {
      clearTimeout(timer);
      socket.destroy();
      if (error === undefined) resolve(value as RespReply);
      else reject(error);
    };
    const timer = setTimeout(() => finish(new Error(`no reply from port ${port} within ${timeoutMs} ms`)), timeoutMs);
    socket.on('connect', () => {
      let command = `*${args.length}\r\n`;
      for (const arg of args) command += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
      socket.write(command);
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      let parsed: ReturnType<typeof parseReply>;
      try {
        parsed = parseReply(received, 0);
      } catch (error) {
        finish(error as Error);
        return;
      }
      if (parsed !== undefined) finish(undefined, parsed.value);
    });
    socket.on('error', (error) => finish(error));
    socket.on('close', () => finish(new Error(`port ${port} closed the connection`)));
  });
}

/** The reply of a command that must succeed, as text. */
async function ok(port: number, args: readonly string[]): Promise<RespReply> {
  const reply = await redisCommand(port, args);
  if (reply instanceof Error) throw new Error(`${args.join(' ')} on port ${port}: ${reply.message}`);
  return reply;
}

/** CRC16/XMODEM, the checksum Redis Cluster maps keys to slots with. */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The cluster slot of `key` (or channel name), hash tags included, as Redis computes it. */
export function slotOf(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % 16384;
}

/** One line of `CLUSTER NODES`. */
export interface ClusterNode {
  readonly id: string;
  readonly port: number;
  readonly flags: readonly string[];
  /** The master's id for a replica, else `undefined`. */
  readonly masterId: string | undefined;
  /** The slot ranges a master serves, `[first, last]`. */
  readonly slots: readonly (readonly [number, number])[];
}

function parseNodes(text: string): ClusterNode[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id, address, flags, master, , , , , ...slots] = line.trim().split(' ');
      const port = Number(/:(\d+)@/.exec(address ?? '')?.[1]);
      return {
        id: id as string,
        port,
        flags: (flags ?? '').split(','),
        masterId: master === '-' ? undefined : master,
        slots: slots
          .filter((range) => !range.startsWith('['))
          .map((range) => {
            const [first, last] = range.split('-').map(Number);
            return [first as number, last ?? (first as number)] as const;
          }),
      };
    });
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let done = false;
    try {
      done = await check();
    } catch {
      done = false;
    }
    if (done) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Whether `port` (and its cluster bus port) can be listened on now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, REDIS_HOST, () => server.close(() => resolve(true)));
  });
}

/**
 * The loopback ports the cluster's nodes are picked from, both ends included. The test suites use
 * 7000–7499 (the default); the chaos harness (tools/chaos/) uses 7500–7999, so that the two never
 * take each other's ports.
 */
export interface ClusterPortRange {
  readonly firstPort: number;
  readonly lastPort: number;
}

const TEST_PORTS: ClusterPortRange = { firstPort: 7000, lastPort: 7499 };
/** Redis Cluster's bus listens on the data port plus this. */
const BUS_OFFSET = 10000;

/** Pick `count` ports in `range` whose bus ports are free too, starting at a random place (several test files may run). */
async function freeClusterPorts(
  count: number,
  taken: ReadonlySet<number>,
  { firstPort, lastPort }: ClusterPortRange,
): Promise<number[]> {
  const span = lastPort - firstPort + 1;
  const start = Math.floor(Math.random() * span);
  const ports: number[] = [];
  for (let i = 0; i < span && ports.length < count; i++) {
    const port = firstPort + ((start + i) % span);
    if (taken.has(port)) continue;
    if ((await portFree(port)) && (await portFree(port + BUS_OFFSET))) ports.push(port);
  }
  if (ports.length < count) throw new Error(`found only ${ports.length} free ports in ${firstPort}–${lastPort}`);
  return ports;
}

/** How long the cluster may take to form, or to recover from a failover. */
const SETTLE_MS = 30_000;

/** Every node process still running, killed when the test process exits however it ends (but SIGKILL). */
const alive = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of alive) child.kill('SIGKILL');
});

/**
 * A Redis Cluster of 3 masters and 3 replicas on loopback. `cluster-node-timeout` is 1 s, so a killed
 * master is replaced within a few seconds.
 */
export class RedisCluster {
  /** The data ports of every node started, masters and replicas. */
  readonly ports: number[] = [];
  private readonly children = new Map<number, ChildProcess>();
  private dir: string | undefined;

  /** @param range where the nodes' ports are picked from (default 7000–7499). */
  constructor(private readonly range: ClusterPortRange = TEST_PORTS) {}

  /** Starts 6 nodes, joins them as a cluster and waits until every node says `cluster_state:ok`. */
  static async start(range: ClusterPortRange = TEST_PORTS): Promise<RedisCluster> {
    const cluster = new RedisCluster(range);
    try {
      await cluster.start();
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  async start(): Promise<void> {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-subscriptions-cluster-'));
    // A port found free may be taken by another test file before our server binds it: retry those.
    for (let attempt = 0; this.ports.length < 6; attempt++) {
      if (attempt === 5) throw new Error('could not start 6 redis-servers on free ports');
      const candidates = await freeClusterPorts(6 - this.ports.length, new Set(this.ports), this.range);
      const started = await Promise.all(candidates.map(async (port) => ((await this.spawnNode(port)) ? port : -1)));
      for (const port of started) if (port !== -1) this.ports.push(port);
    }
    await new Promise<void>((resolve, reject) => {
      execFile(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...this.ports.map((port) => `${REDIS_HOST}:${port}`),
          '--cluster-replicas',
          '1',
          '--cluster-yes',
        ],
        { timeout: SETTLE_MS },
        (error, stdout, stderr) =>
          error
            ? reject(new Error(`redis-cli --cluster create failed: ${error.message}\n${stdout}${stderr}`))
            : resolve(),
      );
    });
    await this.settled();
  }

  /** Starts one node; `false` when it exited at once (its port was taken meanwhile). */
  private async spawnNode(port: number): Promise<boolean> {
    const dir = path.join(this.dir as string, String(port));
    mkdirSync(dir, { recursive: true });
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        REDIS_HOST,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        path.join(dir, 'nodes.conf'),
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--cluster-node-timeout',
        '1000',
        // A replica promotes itself however long its link to the master was down.
        '--cluster-replica-validity-factor',
        '0',
        '--daemonize',
        'no',
      ],
      { stdio: 'ignore' },
    );
    this.children.set(port, child);
    alive.add(child);
    const exited = once(child, 'exit').then(() => false);
    child.once('exit', () => alive.delete(child));
    const up = until(
      async () => (await redisCommand(port, ['PING'], 500)) === 'PONG',
      `redis-server on port ${port}`,
      10_000,
    ).then(() => true);
    const result = await Promise.race([up, exited]).catch(() => false);
    if (!result) {
      this.children.delete(port);
      child.kill('SIGKILL');
    }
    return result;
  }

  /** `host:port` of every node still running: what a cluster client is given as its seeds. */
  seeds(): string[] {
    return this.livePorts().map((port) => `${REDIS_HOST}:${port}`);
  }

  /** The ports of the nodes still running. */
  livePorts(): number[] {
    return this.ports.filter((port) => this.children.has(port));
  }

  /** The cluster as a live node sees it (`CLUSTER NODES`), failed nodes included with their flags. */
  async nodes(): Promise<ClusterNode[]> {
    let lastError: unknown;
    for (const port of this.livePorts()) {
      try {
        return parseNodes(String(await ok(port, ['CLUSTER', 'NODES'])));
      } catch (error) {
        lastError = error;
      }
    }
    throw new Error(`no node answered CLUSTER NODES: ${String(lastError)}`);
  }

  /** The port of the master that serves `slot` now, as the live nodes agree. */
  async masterOf(slot: number): Promise<number> {
    const nodes = await this.nodes();
    const master = nodes.find(
      (node) =>
        node.flags.includes('master') &&
        !node.flags.includes('fail') &&
        node.slots.some(([first, last]) => slot >= first && slot <= last),
    );
    if (master === undefined) throw new Error(`no live master serves slot ${slot}`);
    return master.port;
  }

  /** The ports of the masters now. */
  async masters(): Promise<number[]> {
    return (await this.nodes())
      .filter((node) => node.flags.includes('master') && !node.flags.includes('fail') && node.slots.length > 0)
      .map((node) => node.port);
  }

  /** Sends a command to the node on `port` (a Redis error reply resolves as an `Error`). */
  command(port: number, args: readonly string[]): Promise<RespReply> {
    return redisCommand(port, args);
  }

  /** `PUBSUB SHARDCHANNELS [pattern]` on the node on `port`: the shard channels its clients subscribe to. */
  async shardChannels(port: number, pattern?: string): Promise<string[]> {
    const reply = await ok(port, ['PUBSUB', 'SHARDCHANNELS', ...(pattern === undefined ? [] : [pattern])]);
    return (reply as string[]).slice().sort();
  }

  /**
   * Waits until every live node says `cluster_state:ok`, agrees which node serves each slot (every slot
   * covered by a live master), and every live replica's link to its master is up.
   */
  async settled(timeoutMs = SETTLE_MS): Promise<void> {
    await until(
      async () => {
        const live = this.livePorts();
        for (const port of live) {
          const info = String(await ok(port, ['CLUSTER', 'INFO']));
          if (!info.includes('cluster_state:ok')) return false;
        }
        const views = await Promise.all(
          live.map(async (port) => parseNodes(String(await ok(port, ['CLUSTER', 'NODES'])))),
        );
        const owners = (nodes: ClusterNode[]): string =>
          nodes
            .filter((node) => node.flags.includes('master') && node.slots.length > 0)
            .map((node) => `${node.port}:${node.slots.map(([a, b]) => `${a}-${b}`).join(',')}`)
            .sort()
            .join(' ');
        const first = owners(views[0] ?? []);
        if (views.some((view) => owners(view) !== first)) return false;
        for (const node of views[0] ?? []) {
          if (!this.children.has(node.port)) continue;
          if (node.flags.includes('fail') || node.flags.includes('fail?')) return false;
          if (node.masterId !== undefined && node.flags.includes('slave')) {
            const replication = String(await ok(node.port, ['INFO', 'replication']));
            if (!replication.includes('master_link_status:up')) return false;
          }
        }
        return true;
      },
      'the cluster to be ok on every live node',
      timeoutMs,
    );
  }

  /** Kills the node on `port` with SIGKILL (a crash, not a shutdown) and waits for its exit. */
  async kill(port: number): Promise<void> {
    const child = this.children.get(port);
    if (child === undefined) return;
    this.children.delete(port);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
  }

  /**
   * Starts a killed node again on its port, with its cluster config: a master that was replaced comes
   * back as a replica of the one that replaced it. Waits until the cluster is ok with it.
   */
  async restart(port: number): Promise<void> {
    if (this.children.has(port) || !this.ports.includes(port)) return;
    if (!(await this.spawnNode(port))) throw new Error(`could not restart the node on port ${port}`);
    await this.settled();
  }

  /** Kills every node: the whole cluster is down. {@link restartAll} brings it back. */
  async killAll(): Promise<void> {
    await Promise.all(this.livePorts().map((port) => this.kill(port)));
  }

  /** Starts every killed node again, each with its cluster config, and waits until the cluster is ok. */
  async restartAll(): Promise<void> {
    const down = this.ports.filter((port) => !this.children.has(port));
    const started = await Promise.all(down.map((port) => this.spawnNode(port)));
    if (started.includes(false)) throw new Error('could not restart every node');
    await this.settled();
  }

  /**
   * Kills the master that serves `slot` and waits until its replica was promoted and the cluster is
   * ok again. Resolves with the killed port and the new master's.
   */
  async failMasterOf(slot: number): Promise<{ killed: number; promoted: number }> {
    const killed = await this.masterOf(slot);
    await this.kill(killed);
    const promoted = await this.failedOver(killed, slot);
    return { killed, promoted };
  }

  /** Waits until a live node other than `killed` serves `slot` and the cluster is ok; resolves with its port. */
  async failedOver(killed: number, slot: number, timeoutMs = SETTLE_MS): Promise<number> {
    let promoted = -1;
    await until(
      async () => {
        promoted = await this.masterOf(slot);
        return promoted !== killed && this.children.has(promoted);
      },
      `a replica of port ${killed} to be promoted`,
      timeoutMs,
    );
    await this.settled(timeoutMs);
    return promoted;
  }

  /**
   * Moves `slot` (and its keys) to the master on `toPort`, the way `redis-cli --cluster reshard` does:
   * IMPORTING on the target, MIGRATING on the source, MIGRATE the keys, then NODE on every master.
   * Waits until every live node agrees on the new owner.
   */
  async moveSlot(slot: number, toPort: number): Promise<void> {
    const fromPort = await this.masterOf(slot);
    if (fromPort === toPort) return;
    const nodes = await this.nodes();
    const idOf = (port: number): string => {
      const node = nodes.find((candidate) => candidate.port === port);
      if (node === undefined) throw new Error(`no node on port ${port}`);
      return node.id;
    };
    const fromId = idOf(fromPort);
    const toId = idOf(toPort);
    await ok(toPort, ['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId]);
    await ok(fromPort, ['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId]);
    for (;;) {
      const keys = (await ok(fromPort, ['CLUSTER', 'GETKEYSINSLOT', String(slot), '100'])) as string[];
      if (keys.length === 0) break;
      await ok(fromPort, ['MIGRATE', REDIS_HOST, String(toPort), '', '0', '5000', 'KEYS', ...keys]);
    }
    await ok(toPort, ['CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
    await ok(fromPort, ['CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
    for (const node of nodes) {
      if (
        node.flags.includes('master') &&
        this.children.has(node.port) &&
        node.port !== toPort &&
        node.port !== fromPort
      ) {
        const reply = await redisCommand(node.port, ['CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
        // The view above may be a moment old: a master killed by an earlier test rejoins as a replica of
        // the node promoted in its place, and a replica refuses SETSLOT. It learns the slot's owner from
        // its master; the wait below checks that every live node agrees all the same.
        if (reply instanceof Error && !/only with masters/i.test(reply.message)) {
          throw new Error(`CLUSTER SETSLOT ${slot} NODE ${toId} on port ${node.port}: ${reply.message}`);
        }
      }
    }
    await until(
      async () => {
        for (const port of this.livePorts()) {
          const view = parseNodes(String(await ok(port, ['CLUSTER', 'NODES'])));
          const owner = view.find((node) => node.slots.some(([first, last]) => slot >= first && slot <= last));
          if (owner?.port !== toPort) return false;
        }
        return true;
      },
      `every node to see slot ${slot} on port ${toPort}`,
      SETTLE_MS,
    );
  }

  /** Kills every node still running and removes the cluster's directory. Safe to call more than once. */
  async stop(): Promise<void> {
    await Promise.all([...this.children.keys()].map((port) => this.kill(port)));
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }
}
