/**
 * The stuck run's flags (`npm run soak -- --stuck`, see main.ts for each) and what follows from them:
 * the sizes, the server's configuration and the principals each kind of client takes. Read once, when
 * this module loads; a flag out of range stops the run (exit 2).
 */
import { parseArgs } from 'node:util';
import { intFlag } from '../harness.ts';
import type { ServerConfig } from '../messages.ts';
import { SEQ_KEYS } from './healthy.ts';

/** Churn cycles in flight at most: past that the rate is what the machine manages. */
export const CHURN_IN_FLIGHT = 256;

export const { values: flags } = parseArgs({
  options: {
    stuck: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    'stuck-readers': { type: 'string' },
    healthy: { type: 'string' },
    rate: { type: 'string' },
    'load-rate': { type: 'string' },
    'stall-ms': { type: 'string' },
    'id-bytes': { type: 'string' },
    'phase-ms': { type: 'string' },
    'churn-ms': { type: 'string' },
    'churn-rate': { type: 'string' },
    seed: { type: 'string' },
    netns: { type: 'string', default: 'auto' },
    'sndbuf-kib': { type: 'string' },
    'rcvbuf-kib': { type: 'string' },
    'tcp-mem-limit-mib': { type: 'string' },
    json: { type: 'string' },
  },
});

/** Set in the copy of this run that `inNamespace()` starts inside a network namespace of its own. */
export const IN_NAMESPACE = process.env['SOAK_NETNS'] === '1';
export const quick = flags.quick === true;
export const stuckCount = intFlag('stuck-readers', flags['stuck-readers'], quick ? 64 : 2000, 1);
export const healthyCount = intFlag('healthy', flags.healthy, quick ? 16 : 200, 1);
/**
 * Long enough for every stopped reader to connect before the first is closed (2,000 took 8 to 21 s
 * here, with other work beside), so that the server is seen holding all of them at once.
 */
export const stallMs = intFlag('stall-ms', flags['stall-ms'], quick ? 1000 : 30_000, 100);
/**
 * The listen id's length: it rides in every frame of a stopped reader, so a loopback socket outside
 * the namespace (4 MiB) fills in a few seconds. And a 16 KiB frame is past a socket's high-water mark
 * by itself: every write of one reports the socket full until Node hands it over, and the drain that
 * follows writes what queued meanwhile, the path where a refused write once held 64 frames (commit
 * c551730). With 2 KiB ids that path is not taken and that defect went unseen (tried).
 */
export const idBytes = intFlag('id-bytes', flags['id-bytes'], 16 * 1024, 0);
export const phaseMs = intFlag('phase-ms', flags['phase-ms'], quick ? 1000 : 10_000, 100);
export const churnMs = intFlag('churn-ms', flags['churn-ms'], quick ? 1500 : 15_000, 0);
export const churnRate = intFlag('churn-rate', flags['churn-rate'], quick ? 100 : 200, 1);
export const seed = intFlag('seed', flags.seed, 1, 0);
export const sndbufKib = intFlag('sndbuf-kib', flags['sndbuf-kib'], 64, 4);
export const rcvbufKib = intFlag('rcvbuf-kib', flags['rcvbuf-kib'], 32, 4);
if (!['auto', 'yes', 'no'].includes(flags.netns)) {
  console.error(`soak: --netns expects auto, yes or no, got ${JSON.stringify(flags.netns)}`);
  process.exit(2);
}

/** Load URIs: the stopped readers and churners follow them (with the tool list), the healthy ones none. */
export const LOAD_URIS = 32;
/** `n` of the load URIs, from the `from`th on. */
export const loadUris = (n: number, from = 0): string[] =>
  Array.from({ length: n }, (_, i) => `soak://load/${(from + i) % LOAD_URIS}`);
export const WARMUP_STUCK = 8;
export const WARMUP_HEALTHY = 8;
/** Principals `c<n>`: the stopped readers first (their cycle is their index), then warm-up and churn. */
export const churnCap = Math.ceil((churnRate * churnMs) / 1000) + CHURN_IN_FLIGHT + 64;
const cycles = stuckCount + WARMUP_STUCK + WARMUP_HEALTHY + healthyCount + churnCap;

export const serverConfig: ServerConfig = {
  mode: 'stuck',
  cycles,
  publishRate: intFlag('rate', flags.rate, quick ? 100 : 200, 1),
  loadRate: intFlag('load-rate', flags['load-rate'], 100, 1),
  seqKeys: SEQ_KEYS,
  maxSubscriptionsPerPrincipal: false,
  hotUris: LOAD_URIS,
  keepAliveMs: 1000,
  stallTimeoutMs: stallMs,
  completeTimeoutMs: 500,
  authorizeTimeoutMs: 1000,
  maxChecksInFlight: 256,
};
