/**
 * The stuck run's network namespace: thousands of stopped sockets hold kernel memory (on this
 * machine's loopback a stopped reader's connection buffers about 4 MiB, its 64 KiB MTU sizing the send
 * buffer), so on Linux the run enters a namespace of its own whose loopback caps each socket's send and
 * receive buffers (`--sndbuf-kib`, `--rcvbuf-kib`: `net.ipv4.tcp_wmem` and `tcp_rmem` are per
 * namespace); `--netns=no` stays in the machine's namespace.
 */
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tcpMemLimit } from './kernel.ts';
import { flags, IN_NAMESPACE, rcvbufKib, sndbufKib } from './options.ts';

/**
 * Runs this very command again inside a new network namespace, when wanted and possible; resolves with
 * its exit code, or `undefined` to run here. As root `unshare --net`; otherwise with a user namespace
 * of its own (`--map-root-user`), where an unprivileged user may still own a network namespace.
 */
export async function inNamespace(): Promise<number | undefined> {
  if (IN_NAMESPACE || flags.netns === 'no') return undefined;
  const userns = process.getuid?.() === 0 ? [] : ['--map-root-user'];
  const probe =
    process.platform === 'linux' ? spawnSync('unshare', ['--net', ...userns, 'true'], { stdio: 'ignore' }) : undefined;
  if (probe?.status !== 0) {
    const why = process.platform !== 'linux' ? 'not Linux' : `unshare --net ${userns.join(' ')} failed`;
    if (flags.netns === 'yes') {
      console.error(`soak: --netns=yes, but no network namespace can be made here (${why})`);
      return 2;
    }
    process.stderr.write(`soak: no network namespace (${why}); running in the machine's own\n`);
    return undefined;
  }
  const child = spawn(
    'unshare',
    ['--net', ...userns, '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, SOAK_NETNS: '1', SOAK_TCP_MEM_LIMIT: String(tcpMemLimit) } },
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 2))));
}

/** Inside the namespace: loopback up, and each socket's buffers capped. Says what failed. */
export function setUpNamespace(): string | undefined {
  const up = spawnSync('ip', ['link', 'set', 'lo', 'up'], { encoding: 'utf8' });
  if (up.status !== 0) {
    return `ip link set lo up failed (${up.error?.message ?? up.stderr.trim()}): install iproute2, or --netns=no`;
  }
  // min, default, max in bytes; the default is where a socket starts, the max what autotuning may reach.
  const cap = (kib: number): string => `4096 ${Math.min(16_384, kib * 1024)} ${kib * 1024}`;
  try {
    writeFileSync('/proc/sys/net/ipv4/tcp_wmem', cap(sndbufKib));
    writeFileSync('/proc/sys/net/ipv4/tcp_rmem', cap(rcvbufKib));
  } catch (error) {
    return `the namespace's socket buffers cannot be capped (${String(error)}): --netns=no`;
  }
  return undefined;
}
