/**
 * What the stuck run reads of the kernel, and its guard: the TCP memory (machine-wide: every process's
 * TCP shares one limit, `net.ipv4.tcp_mem`), the server's sockets by state with their unsent bytes,
 * and a guard that stops the run (exit 2) before the TCP memory passes `--tcp-mem-limit-mib` (default:
 * half the kernel's `tcp_mem` low mark), so that no other process is pushed into TCP memory pressure.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { intFlag, mib, type ServerProcess } from '../harness.ts';
import { flags, IN_NAMESPACE } from './options.ts';

const PAGE_BYTES = (() => {
  const getconf = spawnSync('getconf', ['PAGESIZE'], { encoding: 'utf8' });
  const size = Number(getconf.stdout?.trim());
  return Number.isInteger(size) && size > 0 ? size : 4096;
})();

/** The kernel's TCP memory in bytes, machine-wide (`/proc/net/sockstat`), or NaN where unreadable. */
export function tcpMemory(): number {
  try {
    const match = /^TCP:.* mem (\d+)/m.exec(readFileSync('/proc/net/sockstat', 'utf8'));
    return match === null ? Number.NaN : Number(match[1]) * PAGE_BYTES;
  } catch {
    return Number.NaN;
  }
}

/**
 * The guard's limit: `--tcp-mem-limit-mib`, or half of the kernel's low mark (no pressure below it).
 * A network namespace does not show `tcp_mem` (it is machine-wide): the run outside passes it in.
 */
export const tcpMemLimit = ((): number => {
  if (flags['tcp-mem-limit-mib'] !== undefined) {
    return intFlag('tcp-mem-limit-mib', flags['tcp-mem-limit-mib'], 0, 1) * 1024 * 1024;
  }
  const passed = Number(process.env['SOAK_TCP_MEM_LIMIT']);
  if (IN_NAMESPACE && passed > 0) return passed;
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/tcp_mem', 'utf8').trim().split(/\s+/)[0]);
    return Number.isFinite(low) && low > 0 ? (low * PAGE_BYTES) / 2 : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
})();

/** The server's sockets as the kernel lists them (`/proc/net/tcp`), by state, with their unsent bytes. */
export interface KernelSockets {
  readonly byState: Readonly<Record<string, number>>;
  readonly total: number;
  /** Bytes in their send queues: written by the server, not yet acknowledged by the client's kernel. */
  readonly sendQueued: number;
}

const TCP_STATES: Readonly<Record<string, string>> = {
  '01': 'established',
  '02': 'syn-sent',
  '03': 'syn-recv',
  '04': 'fin-wait-1',
  '05': 'fin-wait-2',
  '06': 'time-wait',
  '07': 'close',
  '08': 'close-wait',
  '09': 'last-ack',
  '0B': 'closing',
};

/**
 * Every socket of the server's port but its listener and those in TIME-WAIT (which hold no buffer): in
 * this namespace, or in the machine's (the port is the server's alone either way).
 */
export function kernelSockets(port: number): KernelSockets {
  const byState: Record<string, number> = {};
  let total = 0;
  let sendQueued = 0;
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let text = '';
  try {
    text = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return { byState: { unreadable: 1 }, total: Number.NaN, sendQueued: Number.NaN };
  }
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [, address, , state, queues] = fields;
    if (address === undefined || !address.endsWith(local) || state === '0A' || state === '06') continue;
    const name = TCP_STATES[state ?? ''] ?? `state ${state}`;
    byState[name] = (byState[name] ?? 0) + 1;
    total++;
    sendQueued += parseInt(queues?.split(':')[0] ?? '0', 16);
  }
  return { byState, total, sendQueued };
}

/**
 * Samples the kernel's TCP memory every 100 ms and keeps its peaks; once it passes {@link tcpMemLimit}
 * it kills the server and stops the run (exit 2): every client socket and the server go at once, their
 * kernel buffers with them.
 */
export class TcpMemoryGuard {
  /** The peak since the last {@link resetPeak}, in bytes. */
  peak = 0;
  /** The peak over the whole run, in bytes. */
  overall = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(server: ServerProcess) {
    this.timer = setInterval(() => {
      const bytes = tcpMemory();
      this.peak = Math.max(this.peak, bytes);
      this.overall = Math.max(this.overall, bytes);
      if (bytes > tcpMemLimit) {
        console.error(
          `soak: stopped: the kernel's TCP memory reached ${mib(bytes)}, over the guard's ${mib(tcpMemLimit)} ` +
            '(machine-wide: other processes share it). Fewer --stuck-readers, smaller --sndbuf-kib/--rcvbuf-kib, ' +
            'or --tcp-mem-limit-mib.',
        );
        server.child.kill('SIGKILL');
        process.exit(2);
      }
    }, 100);
    this.timer.unref();
  }

  resetPeak(): void {
    this.peak = 0;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
