/**
 * What the bench reads of a PostgreSQL server of its own: the CPU its processes used, from /proc (the
 * postmaster, its live backends and auxiliary processes, and the children it has reaped), so that the
 * server's cost per event can be told beside Redis's `used_cpu_*`. Linux only; elsewhere `NaN`.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** Fields of /proc/<pid>/stat after the command name: state is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14]. */
function statFields(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: split after its closing one.
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * CPU time, in milliseconds, that the server whose postmaster is `postmasterPid` has used so far: the
 * postmaster's own (user + system), its reaped children's (`cutime + cstime`: backends that have exited),
 * and each live child's. `NaN` when /proc cannot be read.
 */
export function postgresCpuMs(postmasterPid: number): number {
  const own = statFields(postmasterPid);
  if (own === undefined) return Number.NaN;
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(Number(entry));
    if (fields === undefined || Number(fields[1]) !== postmasterPid) continue;
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / TICKS_PER_SECOND;
}
