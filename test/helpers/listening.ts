/**
 * What a process listens on, seen from outside it: whether a TCP port takes connections, and (on Linux)
 * every TCP port the process itself holds in the LISTEN state, read from /proc.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';

/** Whether a TCP connection to `host:port` is accepted (`true`) or refused (`false`). */
export function acceptsConnections(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') resolve(false);
      else reject(error);
    });
  });
}

/** Whether {@link listeningPorts} can tell: Linux's /proc is there. */
export const CAN_LIST_LISTENING_PORTS = existsSync('/proc/self/net/tcp');

/**
 * The TCP ports process `pid` listens on (IPv4 and IPv6, sorted, each once), from its open file
 * descriptors and the kernel's socket tables. Linux only: see {@link CAN_LIST_LISTENING_PORTS}.
 */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed while we looked
    }
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode !== undefined) inodes.add(inode);
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    const path = `/proc/${pid}/net/${table}`;
    if (!existsSync(path)) continue;
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
    for (const line of readFileSync(path, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [local, state, inode] = [fields[1], fields[3], fields[9]];
      if (local === undefined || state !== '0A' || inode === undefined || !inodes.has(inode)) continue; // 0A: LISTEN
      ports.add(parseInt(local.slice(local.lastIndexOf(':') + 1), 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}
