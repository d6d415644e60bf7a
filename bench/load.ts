/**
 * The load generator, in its own process: `bench/run.ts` forks it once per scenario with the ports
 * of the three servers, it drives them one after the other (or alternately, where drift matters),
 * and sends back the raw figures over IPC. Every loop is bounded in count and time.
 */
import http from 'node:http';
import {
  closeAll,
  cpuBetween,
  hammer,
  openListen,
  openMany,
  prefill,
  publish,
  request,
  sleep,
  usage,
  waitFor,
} from './lib/client.ts';
import type { StreamReader } from './lib/client.ts';
import type { Usage } from './lib/control.ts';
import { now } from '../tools/shared/clock.ts';
import { median, percentile, prng, slope } from '../tools/shared/stats.ts';
import { listenBody, listenHeaders, noteUri, PRINCIPAL, toolsListRequest, TOKEN } from './lib/wire.ts';
import type { Filter } from './lib/wire.ts';

/** The servers; `ceiling-express` is the ceiling mounted in Express (idle and open only: what the framework costs). */
export type Target = 'ours' | 'sdk' | 'ceiling' | 'ceiling-express';
/** One target's figures: numbers (NaN where not applicable), booleans, or short strings. */
export type Figures = Record<string, number | boolean | string>;
export type ScenarioResult = Partial<Record<Target, Figures>>;

/** The ports of node A and node B: two `ours` processes joined by a `RedisBus` on one Redis. */
export interface Nodes {
  readonly a: number;
  readonly b: number;
}

export interface LoadRequest {
  readonly scenario: string;
  readonly ports: Record<Target, number>;
  readonly targets: readonly Target[];
  readonly params: Record<string, any>;
  readonly timeoutMs: number;
  /** Only for a scenario with `redisNodes`. */
  readonly nodes?: Nodes;
}

type Scenario = (
  ports: Record<Target, number>,
  targets: readonly Target[],
  params: any,
  nodes: Nodes | undefined,
) => Promise<ScenarioResult>;

const sum = (readers: readonly StreamReader[]): number => readers.reduce((a, r) => a + r.events, 0);

/** Publish→receive latencies of stream `reader` for events `t` that it received as its frames `from…`. */
function latencies(out: number[], reader: StreamReader, from: number, t: readonly number[]): void {
  for (let k = 0; k < t.length; k++) {
    const idx = from + k;
    if (idx >= reader.events || idx >= reader.times.length) break;
    out.push((reader.times[idx] as number) - (t[k] as number));
  }
}

/**
 * Whether the server on `port` is idle: it used under a tenth of a 100 ms window's CPU time. Two
 * control requests, a fraction of a millisecond of its CPU.
 */
async function serverIdle(port: number): Promise<boolean> {
  const a = await usage(port);
  await sleep(100);
  const b = await usage(port);
  return cpuBetween(a, b) < 0.1 * (b.at - a.at) * 1000;
}

/**
 * Waits until every reader has `events` frames past `base`, or until nothing arrived anywhere for
 * 300 ms since `sentAt` and the server holding the streams (`port`) is idle: a server may coalesce
 * identical events for a socket that pushes back, so a stream may get fewer frames, while a busy
 * server is only late (the SDK, under a 1,000 × 200 burst, starts writing a second after the publish
 * and pauses as long between writes). Then collects the round: frames received, publish→receive
 * latencies (frame j is event j, except a last frame that arrives short of `events`: it carries the
 * latest event), and when the last stream had its last frame.
 */
async function collectRound(
  readers: readonly StreamReader[],
  base: readonly number[],
  t: readonly number[],
  events: number,
  sentAt: number,
  latencies: number[],
  port: number,
): Promise<{ frames: number; last: number; complete: boolean }> {
  const lastAny = (): number => readers.reduce((m, x) => Math.max(m, x.lastAt), 0);
  const done = (): boolean => readers.every((x, i) => x.events >= (base[i] as number) + events);
  const quiet = (): boolean => now() - sentAt > 300 && now() - lastAny() > 300;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    await waitFor(() => done() || quiet(), deadline - Date.now(), 10);
    if (done() || ((await serverIdle(port)) && quiet())) break;
  }
  let frames = 0;
  let last = 0;
  let complete = true;
  readers.forEach((x, i) => {
    const from = base[i] as number;
    const m = x.events - from;
    frames += m;
    if (m === 0) {
      complete = false;
      return;
    }
    for (let j = 0; j < m && from + j < x.times.length; j++) {
      const event = j === m - 1 ? events - 1 : j;
      latencies.push((x.times[from + j] as number) - (t[event] as number));
    }
    last = Math.max(last, x.times[Math.min(from + m, x.times.length) - 1] as number);
  });
  return { frames, last, complete };
}

/**
 * 1. fan-out: N streams on toolsListChanged, E events back to back, R rounds. A server may coalesce
 * identical events for a socket that pushes back (ours does), so a stream is done when it has E
 * frames or when nothing has arrived anywhere for 300 ms and the server is idle; its last frame stands
 * for the last event.
 */
const fanout: Scenario = async (ports, targets, p: { streams: number; events: number; rounds: number }) => {
  const result: ScenarioResult = {};
  for (const target of targets) {
    const port = ports[target];
    const readers = await openMany(port, p.streams, () => ({ toolsListChanged: true }), {
      capacity: 20 + p.events * p.rounds,
    });
    await sleep(300);
    // One unmeasured burst first, so every server's write path is compiled before the figures count: 20
    // events (under a socket's high-water mark, so no server coalesces them), each stream waited for.
    const warmup = Math.min(20, p.events);
    const warm = readers.map((x) => x.events + warmup);
    await publish(port, { kind: 'tools', count: warmup });
    await waitFor(() => readers.every((x, i) => x.events >= (warm[i] as number)), 60_000, 10);
    await sleep(200);
    const rates: number[] = [];
    const frameRates: number[] = [];
    const cpus: number[] = [];
    const frameCpus: number[] = [];
    const perStream: number[] = [];
    const lat: number[] = [];
    let complete = true;
    for (let r = 0; r < p.rounds; r++) {
      const base = readers.map((x) => x.events);
      const u0 = await usage(port);
      const t = await publish(port, { kind: 'tools', count: p.events });
      const published = now();
      const round = await collectRound(readers, base, t, p.events, published, lat, port);
      const u1 = await usage(port);
      const { frames, last } = round;
      if (!round.complete) complete = false;
      const seconds = (last - (t[0] as number)) / 1000;
      const offered = p.streams * p.events;
      rates.push(offered / seconds);
      frameRates.push(frames / seconds);
      cpus.push(cpuBetween(u0, u1) / offered);
      frameCpus.push(cpuBetween(u0, u1) / frames);
      perStream.push(frames / p.streams);
      await sleep(200);
    }
    closeAll(readers);
    result[target] = {
      deliveriesPerSec: median(rates),
      framesPerSec: median(frameRates),
      framesPerStream: median(perStream),
      p50Ms: percentile(lat, 50),
      p99Ms: percentile(lat, 99),
      cpuUsPerDelivery: median(cpus),
      cpuUsPerFrame: median(frameCpus),
      complete,
    };
    await sleep(500);
  }
  return result;
};

/** 2. resource fan-out: streams × URIs each, stages of open streams, write route and publish bursts. */
const resources: Scenario = async (
  ports,
  targets,
  p: {
    streams: number;
    urisPerStream: number;
    stages: number[];
    writeMs: number;
    concurrency: number;
    burst: number;
    seed: number;
  },
) => {
  const result: ScenarioResult = {};
  const pool = p.streams * p.urisPerStream;
  const uris = Array.from({ length: pool }, (_, i) => noteUri(i));
  const filter = (i: number): Filter => ({
    resourceSubscriptions: uris.slice(i * p.urisPerStream, (i + 1) * p.urisPerStream),
  });
  const writeBody = JSON.stringify({ text: 'updated' });
  const writeHeaders = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
  for (const target of targets) {
    const port = ports[target];
    await prefill(port, uris);
    const rand = prng(p.seed);
    const readers: StreamReader[] = [];
    const figures: Figures = {};
    const xs: number[] = [];
    const publishCpu: number[] = [];
    const writeCpu: number[] = [];
    let complete = true;
    // Warm the write route's code paths: the first stage must not pay for the JIT.
    await hammer(port, { durationMs: p.writeMs, concurrency: p.concurrency }, () => ({
      method: 'PUT',
      path: `/api/notes/alice/n${Math.floor(rand() * pool)}`,
      body: writeBody,
      headers: writeHeaders,
    }));
    const hitXs: number[] = [];
    const hitCpu: number[] = [];
    for (const stage of p.stages) {
      if (readers.length < stage) {
        readers.push(
          ...(await openMany(port, stage - readers.length, filter, { from: readers.length, capacity: 256 })),
        );
        await sleep(300);
      }
      const w0 = await usage(port);
      const writes = await hammer(port, { durationMs: p.writeMs, concurrency: p.concurrency }, () => ({
        method: 'PUT',
        path: `/api/notes/alice/n${Math.floor(rand() * pool)}`,
        body: writeBody,
        headers: writeHeaders,
      }));
      const w1 = await usage(port);
      figures[`writeRps@${stage}`] = writes.requests / (writes.elapsedMs / 1000);
      figures[`writeCpuUs@${stage}`] = cpuBetween(w0, w1) / writes.requests;
      writeCpu.push(cpuBetween(w0, w1) / writes.requests);
      // Let deliveries of the write phase land before the bursts.
      await sleep(200);
      // Matching alone: updates of URIs no stream holds, so nothing is written at any stage.
      const misses = Array.from({ length: p.burst }, () => noteUri(pool + Math.floor(rand() * pool)));
      const m0 = await usage(port);
      await publish(port, { kind: 'resource', count: p.burst, uris: misses });
      const m1 = await usage(port);
      xs.push(stage / 1000);
      publishCpu.push(cpuBetween(m0, m1) / p.burst);
      figures[`missCpuUs@${stage}`] = cpuBetween(m0, m1) / p.burst;
      if (stage === 0) continue;
      // Matching and delivery: updates of random URIs held by exactly one open stream each.
      const order = Array.from({ length: p.burst }, () => uris[Math.floor(rand() * stage * p.urisPerStream)] as string);
      const base = readers.map((r) => r.events);
      const before = sum(readers);
      const u0 = await usage(port);
      const t = await publish(port, { kind: 'resource', count: p.burst, uris: order });
      const ok = await waitFor(() => sum(readers) - before >= p.burst, 60_000);
      const u1 = await usage(port);
      complete &&= ok;
      hitXs.push(stage / 1000);
      hitCpu.push(cpuBetween(u0, u1) / p.burst);
      figures[`hitCpuUs@${stage}`] = cpuBetween(u0, u1) / p.burst;
      if (stage === p.stages[p.stages.length - 1]) {
        const seen = new Int32Array(readers.length);
        const lat: number[] = [];
        let last = 0;
        for (let k = 0; k < order.length; k++) {
          const uri = order[k] as string;
          const s = Math.floor(Number(uri.slice(uri.lastIndexOf('n') + 1)) / p.urisPerStream);
          const reader = readers[s];
          if (reader === undefined) continue;
          const idx = (base[s] as number) + (seen[s] as number);
          seen[s]!++;
          if (idx < reader.events && idx < reader.times.length) {
            const at = reader.times[idx] as number;
            lat.push(at - (t[k] as number));
            last = Math.max(last, at);
          }
        }
        figures['deliveredPerSec'] = (sum(readers) - before) / ((last - (t[0] as number)) / 1000);
        figures['p50Ms'] = percentile(lat, 50);
        figures['p99Ms'] = percentile(lat, 99);
      }
    }
    figures['hitSlopeUs'] = slope(hitXs, hitCpu);
    const first = p.stages[0] as number;
    const lastStage = p.stages[p.stages.length - 1] as number;
    figures['retention'] = (figures[`writeRps@${lastStage}`] as number) / (figures[`writeRps@${first}`] as number);
    figures['publishSlopeUs'] = slope(xs, publishCpu);
    figures['writeSlopeUs'] = slope(xs, writeCpu);
    figures['complete'] = complete;
    closeAll(readers);
    result[target] = figures;
    await sleep(500);
  }
  return result;
};

/** Reads the last data frame of a captured body as JSON. */
function lastFrame(text: string): { method?: string; params?: { uri?: string } } | undefined {
  const at = text.lastIndexOf('\ndata: ');
  if (at === -1) return undefined;
  const end = text.indexOf('\n', at + 7);
  try {
    return JSON.parse(text.slice(at + 7, end === -1 ? undefined : end)) as { method?: string };
  } catch {
    return undefined;
  }
}

/**
 * 3. slow consumer: one stream stops reading while its URI is flooded (memory measured after GC at
 * each checkpoint of `floods`); healthy streams listen to another URI updated every `every`th event.
 */
const slow: Scenario = async (
  ports,
  targets,
  p: { healthy: number; floods: number[]; every: number; chunk: number },
) => {
  const result: ScenarioResult = {};
  const A = noteUri(1_000_000);
  const B = noteUri(1_000_001);
  const C = noteUri(1_000_002);
  const total = p.floods[p.floods.length - 1] as number;
  for (const target of targets) {
    const port = ports[target];
    const healthy = await openMany(port, p.healthy, () => ({ resourceSubscriptions: [B] }), {
      capacity: Math.ceil(((p.floods[0] as number) + total) / p.every) + 8,
    });
    const stuck = await openListen(port, 'slow', { resourceSubscriptions: [A] }, { capture: true });
    stuck.pause();
    await sleep(300);
    // `count` events, every `every`th one an update of B (the healthy streams'), the others of
    // `other`, published `chunk` at a time; `at(n)` runs after the first n. Returns B's latencies.
    const phase = async (other: string, count: number, at: (n: number) => Promise<void>): Promise<number[]> => {
      const pattern = Array.from({ length: p.every }, (_, i) => (i === p.every - 1 ? B : other));
      const bTimes: number[] = [];
      const base = healthy.map((r) => r.events);
      for (let done = 0; done < count;) {
        const t = await publish(port, { kind: 'resource', count: p.chunk, uris: pattern });
        for (let k = p.every - 1; k < t.length; k += p.every) bTimes.push(t[k] as number);
        done += p.chunk;
        await at(done);
      }
      await waitFor(() => healthy.every((r, i) => r.events >= (base[i] as number) + bTimes.length), 60_000);
      const lat: number[] = [];
      healthy.forEach((r, i) => latencies(lat, r, base[i] as number, bTimes));
      return lat;
    };
    const baseline = await phase(C, p.floods[0] as number, async () => {});
    const m0 = await usage(port, true);
    const figures: Figures = {};
    const during = await phase(A, total, async (n) => {
      if (!p.floods.includes(n)) return;
      const m = await usage(port, true);
      figures[`growthMb@${n}`] = (m.mem.heapUsed + m.mem.external - (m0.mem.heapUsed + m0.mem.external)) / 1048576;
      figures[`rssGrowthMb@${n}`] = (m.mem.rss - m0.mem.rss) / 1048576;
    });
    const before = stuck.events;
    const resumedAt = now();
    stuck.resume();
    await waitFor(() => now() - Math.max(resumedAt, stuck.lastAt) > 500, 60_000, 20);
    const received = stuck.events - before;
    const last = lastFrame(stuck.text);
    const probeBefore = stuck.events;
    await publish(port, { kind: 'resource', count: 1, uris: [A] });
    const open = await waitFor(() => stuck.events > probeBefore, 3000);
    closeAll([...healthy, stuck]);
    result[target] = {
      ...figures,
      receivedOnResume: received,
      learnedLatest: last?.method === 'notifications/resources/updated' && last.params?.uri === A,
      stayedOpen: open,
      healthyP99BaselineMs: percentile(baseline, 99),
      healthyP99DuringMs: percentile(during, 99),
    };
    await sleep(500);
  }
  return result;
};

/** 4. idle memory: N open streams, heap and RSS per stream after GC. */
const idle: Scenario = async (ports, targets, p: { streams: number; warmup: number }) => {
  const result: ScenarioResult = {};
  // Ten URIs each, as the issue states the target (stream i holds URIs 10i…10i+9, none shared).
  const filter = (i: number): Filter => ({
    toolsListChanged: true,
    resourceSubscriptions: Array.from({ length: 10 }, (_, k) => noteUri(10 * i + k)),
  });
  for (const target of targets) {
    const port = ports[target];
    // Warm the code paths (lazy modules, JIT) so they are not counted as per-stream memory.
    closeAll(await openMany(port, p.warmup, filter, { from: 100_000 }));
    await sleep(500);
    const m0 = await usage(port, true);
    const readers = await openMany(port, p.streams, filter);
    await sleep(500);
    const m1 = await usage(port, true);
    closeAll(readers);
    result[target] = {
      heapKbPerStream: (m1.mem.heapUsed - m0.mem.heapUsed) / p.streams / 1024,
      externalKbPerStream: (m1.mem.external - m0.mem.external) / p.streams / 1024,
      rssKbPerStream: (m1.mem.rss - m0.mem.rss) / p.streams / 1024,
      counted: m1.streams - m0.streams,
    };
    await sleep(500);
  }
  return result;
};

/** 5. open cost: listen with U URIs, one at a time; time to the acknowledgement. */
const open: Scenario = async (ports, targets, p: { samples: number; warmup: number; uris: number }) => {
  const result: ScenarioResult = {};
  const filter: Filter = { resourceSubscriptions: Array.from({ length: p.uris }, (_, i) => noteUri(i)) };
  for (const target of targets) {
    const port = ports[target];
    const times: number[] = [];
    let honored = 0;
    let before: Usage | undefined;
    for (let i = 0; i < p.warmup + p.samples; i++) {
      if (i === p.warmup) before = await usage(port);
      const t0 = now();
      const reader = await openListen(port, `o${i}`, filter, { capture: i === 0 });
      if (i >= p.warmup) times.push(reader.ackAt - t0);
      if (i === 0) {
        const ack = lastFrame(reader.text) as { params?: { notifications?: Filter } } | undefined;
        honored = ack?.params?.notifications?.resourceSubscriptions?.length ?? 0;
      }
      reader.close();
    }
    // Server CPU per listen, from the first measured open to the last one's close (one usage call included).
    const cpuUsPerOpen = cpuBetween(before as Usage, await usage(port)) / p.samples;
    result[target] = { ackP50Ms: percentile(times, 50), ackP99Ms: percentile(times, 99), honored, cpuUsPerOpen };
    await sleep(300);
  }
  return result;
};

/** 6. pass-through: tools/list requests/s, the targets alternating round by round. */
const passthrough: Scenario = async (
  ports,
  targets,
  p: { rounds: number; durationMs: number; concurrency: number },
) => {
  const result: ScenarioResult = {};
  const rps: Partial<Record<Target, number[]>> = {};
  const cpu: Partial<Record<Target, number[]>> = {};
  const statuses: Partial<Record<Target, string>> = {};
  const make = (n: number) => {
    const { body, headers } = toolsListRequest(n);
    return { method: 'POST', path: '/mcp', body, headers };
  };
  for (const target of targets) await hammer(ports[target], { durationMs: 300, concurrency: p.concurrency }, make);
  for (let r = 0; r < p.rounds; r++) {
    for (const target of r % 2 === 0 ? targets : [...targets].reverse()) {
      const port = ports[target];
      const u0 = await usage(port);
      const run = await hammer(port, { durationMs: p.durationMs, concurrency: p.concurrency }, make);
      const u1 = await usage(port);
      (rps[target] ??= []).push(run.requests / (run.elapsedMs / 1000));
      (cpu[target] ??= []).push(cpuBetween(u0, u1) / Math.max(1, run.requests));
      statuses[target] = JSON.stringify(run.statuses);
    }
  }
  for (const target of targets) {
    result[target] = {
      rps: median(rps[target] ?? []),
      cpuUsPerRequest: median(cpu[target] ?? []),
      statuses: statuses[target] ?? '',
    };
  }
  return result;
};

/** Sends one listen request; resolves with the time to its first frame or its whole error response. */
function timeListen(port: number, id: string, filter: Filter): Promise<{ ms: number; status: number }> {
  const body = listenBody(id, filter);
  return new Promise((resolve, reject) => {
    const t0 = now();
    const req = http.request(
      { host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: listenHeaders(body), agent: false },
      (res) => {
        const status = res.statusCode ?? 0;
        const finish = (): void => {
          resolve({ ms: now() - t0, status });
          req.destroy();
          res.destroy();
        };
        if (status === 200) {
          let seen = '';
          res.on('data', (chunk: Buffer) => {
            seen += chunk.toString();
            if (seen.includes('\n\n')) finish();
          });
        } else {
          res.resume();
          res.on('end', finish);
        }
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/** 7. validation: time to the answer of a listen naming 1k / 10k / 50k URIs. */
const validation: Scenario = async (ports, targets, p: { sizes: number[]; reps: number }) => {
  const result: ScenarioResult = {};
  for (const target of targets) {
    const figures: Figures = {};
    for (const size of p.sizes) {
      const filter: Filter = { resourceSubscriptions: Array.from({ length: size }, (_, i) => noteUri(i)) };
      const times: number[] = [];
      let status = 0;
      for (let r = 0; r < p.reps + 1; r++) {
        const answer = await timeListen(ports[target], `v${size}-${r}`, filter);
        if (r > 0) times.push(answer.ms);
        status = answer.status;
      }
      figures[`ms@${size}`] = median(times);
      figures[`status@${size}`] = status;
    }
    const small = p.sizes[0] as number;
    const large = p.sizes[p.sizes.length - 1] as number;
    figures['perUriGrowth'] = (figures[`ms@${large}`] as number) / large / ((figures[`ms@${small}`] as number) / small);
    result[target] = figures;
    await sleep(300);
  }
  return result;
};

/** 8. disconnect: N idle clients hang up at once; open streams the server counts afterwards. */
const disconnect: Scenario = async (ports, targets, p: { streams: number; checksMs: number[] }) => {
  const result: ScenarioResult = {};
  for (const target of targets) {
    const port = ports[target];
    const readers = await openMany(port, p.streams, () => ({ toolsListChanged: true }));
    await sleep(300);
    const u0 = await usage(port);
    const t0 = now();
    closeAll(readers);
    const figures: Figures = { openBefore: u0.streams };
    for (const at of p.checksMs) {
      await sleep(Math.max(0, t0 + at - now()));
      figures[`openAfter${at}`] = (await usage(port)).streams - (u0.streams - p.streams);
    }
    result[target] = figures;
  }
  return result;
};

/** One burst of writes and what the streams made of it. */
interface Burst {
  /** Stream × event pairs per second, until each stream had its last frame. */
  deliveriesPerSec: number;
  /** From the first write sent to the last stream's last frame. */
  seconds: number;
  /** Writes the write route answered per second. */
  writesPerSec: number;
  framesPerStream: number;
  /** Frames per chunk the client read: above 1 where the server wrote several events in one write. */
  framesPerChunk: number;
  /** Publish→receive latencies of every frame, in ms. */
  latencies: number[];
  /** Server CPU per write, in µs, of each port in `cpuPorts`. */
  cpuUsPerEvent: number[];
  complete: boolean;
}

/** A kept-alive connection to one node's write route; `put(name, k)` rewrites note `name` (version `k`). */
function noteWriter(port: number): { put(name: string, k: number): Promise<void>; close(): void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
  return {
    async put(name, k) {
      const body = JSON.stringify({ text: `v${k}` });
      const { status, text } = await request(port, 'PUT', `/api/notes/${PRINCIPAL}/${name}`, body, headers, agent);
      if (status !== 200 && status !== 201) throw new Error(`PUT ${name}: HTTP ${status}: ${text.slice(0, 200)}`);
    },
    close: () => agent.destroy(),
  };
}

/**
 * `events` writes of note `name` through the write route of `writePort`, back to back on one
 * kept-alive connection (each sent when the previous one was answered), to `readers`, which hold the
 * note's URI, on the server `cpuPorts[0]`. A stream is done when it has a frame per write, or when
 * nothing arrived anywhere for 300 ms and that server is idle (the fan-out's rule: a socket that pushed
 * back got identical events coalesced, and its last frame stands for the last write).
 */
async function writeBurst(
  readers: readonly StreamReader[],
  writePort: number,
  cpuPorts: readonly number[],
  name: string,
  events: number,
): Promise<Burst> {
  const writer = noteWriter(writePort);
  try {
    // Opens the connection on a note no stream holds, so the first timed write does not pay for it.
    await writer.put(`${name}-primer`, 0);
    const base = readers.map((x) => x.events);
    const chunks0 = readers.reduce((sum, x) => sum + x.chunks, 0);
    const u0 = await Promise.all(cpuPorts.map((port) => usage(port)));
    const t = new Array<number>(events);
    for (let k = 0; k < events; k++) {
      t[k] = now();
      await writer.put(name, k);
    }
    const written = now();
    const latencies: number[] = [];
    const { frames, last, complete } = await collectRound(
      readers,
      base,
      t,
      events,
      written,
      latencies,
      cpuPorts[0] as number,
    );
    const u1 = await Promise.all(cpuPorts.map((port) => usage(port)));
    const seconds = (last - (t[0] as number)) / 1000;
    return {
      deliveriesPerSec: (readers.length * events) / seconds,
      seconds,
      writesPerSec: events / ((written - (t[0] as number)) / 1000),
      framesPerStream: frames / readers.length,
      framesPerChunk: frames / (readers.reduce((sum, x) => sum + x.chunks, 0) - chunks0),
      latencies,
      cpuUsPerEvent: u0.map((u, i) => cpuBetween(u, u1[i]!) / events),
      complete,
    };
  } finally {
    writer.close();
  }
}

/** What writes one at a time gave one mode: every frame's latency, and per write the first stream's. */
interface OneAtATime {
  latencies: number[];
  firstLatencies: number[];
  complete: boolean;
}

/**
 * `events` writes of note `name` per setup, one at a time: each is sent once every stream received the
 * previous one, so one event is in flight end to end and no queue forms anywhere. The setups take
 * turns write by write (their order reversed every other write), so a change in the machine's load
 * hits them alike, which matters for a difference of a millisecond.
 */
async function oneAtATime(
  setups: readonly { readers: readonly StreamReader[]; write: number }[],
  name: string,
  events: number,
): Promise<OneAtATime[]> {
  const writers = setups.map((setup) => noteWriter(setup.write));
  const out = setups.map((): OneAtATime => ({ latencies: [], firstLatencies: [], complete: true }));
  try {
    for (const writer of writers) await writer.put(`${name}-primer`, 0);
    const order = setups.map((_, i) => i);
    for (let k = 0; k < events; k++) {
      for (const m of k % 2 === 0 ? order : [...order].reverse()) {
        const { readers } = setups[m]!;
        const result = out[m]!;
        const base = readers.map((x) => x.events);
        const t = now();
        await writers[m]!.put(name, k);
        result.complete &&= await waitFor(() => readers.every((x, i) => x.events > (base[i] as number)), 10_000, 1);
        let first = Number.POSITIVE_INFINITY;
        readers.forEach((x, i) => {
          const idx = base[i] as number;
          if (idx >= x.events || idx >= x.times.length) return;
          const latency = (x.times[idx] as number) - t;
          result.latencies.push(latency);
          first = Math.min(first, latency);
        });
        if (Number.isFinite(first)) result.firstLatencies.push(first);
      }
    }
  } finally {
    for (const writer of writers) writer.close();
  }
  return out;
}

/**
 * 9. cross-node: N streams on node A hold one note's URI; writes of that note go through node B's
 * write route, and B's `RedisBus` carries each event to A. Single node: the same load on `ours` with
 * no bus (streams and writes on one process). Same node with the bus: streams and writes on A (B
 * hears each event and has no stream for it), which tells the bus's cost on the publishing node from
 * the hop's. After a warm-up burst per mode, bursts of E writes back to back alternate mode by mode
 * (order reversed every other round), then writes one at a time alternate write by write.
 */
const crossnode: Scenario = async (
  ports,
  _targets,
  p: { streams: number; events: number; paced: number; warmup: number; rounds: number },
  nodes,
) => {
  if (nodes === undefined) throw new Error('crossnode: needs node A and node B (redisNodes)');
  const note = 'crossnode';
  const uri = `note://${PRINCIPAL}/${note}`;
  await Promise.all([ports.ours, nodes.a, nodes.b].map((port) => prefill(port, [uri])));
  // Every write that reaches A's streams (cross-node and same node, warm-ups included) fits their capacity.
  const capacity = 2 * (p.warmup + p.rounds * p.events + p.paced);
  const filter = (): Filter => ({ resourceSubscriptions: [uri] });
  const single = await openMany(ports.ours, p.streams, filter, { capacity });
  const onA = await openMany(nodes.a, p.streams, filter, { capacity });
  await sleep(300);
  type Mode = 'single' | 'cross' | 'local';
  const setups: Record<Mode, { readers: StreamReader[]; write: number; cpu: number[] }> = {
    single: { readers: single, write: ports.ours, cpu: [ports.ours] },
    cross: { readers: onA, write: nodes.b, cpu: [nodes.a, nodes.b] },
    local: { readers: onA, write: nodes.a, cpu: [nodes.a, nodes.b] },
  };
  const modes: Mode[] = ['single', 'cross', 'local'];
  const bursts: Record<Mode, Burst[]> = { single: [], cross: [], local: [] };
  for (const mode of modes) {
    const { readers, write, cpu } = setups[mode];
    await writeBurst(readers, write, cpu, note, p.warmup);
    await sleep(200);
  }
  for (let r = 0; r < p.rounds; r++) {
    for (const mode of r % 2 === 0 ? modes : [...modes].reverse()) {
      const { readers, write, cpu } = setups[mode];
      bursts[mode].push(await writeBurst(readers, write, cpu, note, p.events));
      await sleep(200);
    }
  }
  const paced = await oneAtATime(
    modes.map((mode) => setups[mode]),
    note,
    p.paced,
  );
  const [a, b] = await Promise.all([usage(nodes.a), usage(nodes.b)]);
  closeAll([...single, ...onA]);
  const figures: Figures = {
    complete: modes.every((mode, m) => paced[m]!.complete && bursts[mode].every((x) => x.complete)),
    busPublishedB: b.bus?.published ?? Number.NaN,
    busReceivedA: a.bus?.received ?? Number.NaN,
    busDropped: (a.bus?.dropped ?? Number.NaN) + (b.bus?.dropped ?? Number.NaN),
    busReconnects: (a.bus?.reconnects ?? Number.NaN) + (b.bus?.reconnects ?? Number.NaN),
  };
  modes.forEach((mode, m) => {
    const list = bursts[mode];
    const lat = list.flatMap((x) => x.latencies);
    figures[`${mode}DeliveriesPerSec`] = median(list.map((x) => x.deliveriesPerSec));
    figures[`${mode}FramesPerStream`] = median(list.map((x) => x.framesPerStream));
    figures[`${mode}FramesPerChunk`] = median(list.map((x) => x.framesPerChunk));
    figures[`${mode}WritesPerSec`] = median(list.map((x) => x.writesPerSec));
    figures[`${mode}P50Ms`] = percentile(lat, 50);
    figures[`${mode}P99Ms`] = percentile(lat, 99);
    figures[`${mode}PacedP50Ms`] = percentile(paced[m]!.latencies, 50);
    figures[`${mode}PacedP99Ms`] = percentile(paced[m]!.latencies, 99);
    figures[`${mode}PacedFirstP50Ms`] = median(paced[m]!.firstLatencies);
    setups[mode].cpu.forEach((_, i) => {
      figures[`${mode}CpuUsPerEvent${i === 0 ? '' : 'B'}`] = median(list.map((x) => x.cpuUsPerEvent[i] as number));
    });
  });
  return { ours: figures };
};

/** What one server's write route costs alone: server CPU and round trip per write request. */
interface RouteCost {
  cpuUs: number;
  ms: number;
}

/**
 * `writes` writes of note `name` through the write route of `port`, one in flight at a time, while no
 * stream holds the note: the route's own cost (HTTP parsing, the framework, the app's service, the
 * answer), after `warmup` unmeasured writes (the route's cost still falls after a few hundred).
 */
async function writeRouteCost(port: number, name: string, writes: number, warmup: number): Promise<RouteCost> {
  const writer = noteWriter(port);
  try {
    for (let k = 0; k < warmup; k++) await writer.put(name, k);
    const u0 = await usage(port);
    const t0 = now();
    for (let k = 0; k < writes; k++) await writer.put(name, k);
    const ms = (now() - t0) / writes;
    const u1 = await usage(port);
    return { cpuUs: cpuBetween(u0, u1) / writes, ms };
  } finally {
    writer.close();
  }
}

/**
 * 10. one event per tick: N streams hold one note's URI, and K writes of that note go through each
 * server's own write route (`PUT /api/notes/alice/tick`), one request in flight at a time, so every
 * event is published in a tick of its own and there is nothing to batch: one socket write per stream
 * per event, for every server. Before any stream opens, the same K writes (after unmeasured ones)
 * measure each server's write route alone, CPU and round trip per request: the host's route (Express,
 * JSON, the notes service) costs far more than the ceiling's bare one, and that is the host app's
 * cost, not the library's, so the net figures subtract it. Then the streams open on every server, a warm-up burst per server, and
 * bursts of K writes alternate server by server (order reversed every other round); medians of the
 * rounds, percentiles of every frame.
 */
const tick: Scenario = async (
  ports,
  targets,
  p: { streams: number; writes: number; warmup: number; rounds: number; routeWarmup: number },
) => {
  const note = 'tick';
  const uri = `note://${PRINCIPAL}/${note}`;
  const route: Partial<Record<Target, RouteCost>> = {};
  for (const target of targets) {
    await prefill(ports[target], [uri]);
    route[target] = await writeRouteCost(ports[target], note, p.writes, p.routeWarmup);
  }
  const readers: Partial<Record<Target, StreamReader[]>> = {};
  const capacity = p.warmup + p.rounds * p.writes;
  for (const target of targets) {
    readers[target] = await openMany(ports[target], p.streams, () => ({ resourceSubscriptions: [uri] }), { capacity });
  }
  await sleep(300);
  const bursts: Partial<Record<Target, Burst[]>> = {};
  for (const target of targets) {
    await writeBurst(readers[target]!, ports[target], [ports[target]], note, p.warmup);
    await sleep(200);
  }
  for (let r = 0; r < p.rounds; r++) {
    for (const target of r % 2 === 0 ? targets : [...targets].reverse()) {
      (bursts[target] ??= []).push(await writeBurst(readers[target]!, ports[target], [ports[target]], note, p.writes));
      await sleep(200);
    }
  }
  closeAll(targets.flatMap((target) => readers[target]!));
  const result: ScenarioResult = {};
  for (const target of targets) {
    const list = bursts[target] ?? [];
    const alone = route[target]!;
    const lat = list.flatMap((x) => x.latencies);
    const cpuPerWrite = median(list.map((x) => x.cpuUsPerEvent[0] as number));
    result[target] = {
      routeCpuUs: alone.cpuUs,
      routeMs: alone.ms,
      deliveriesPerSec: median(list.map((x) => x.deliveriesPerSec)),
      // The time the writes' own round trips take with no stream open is not the fan-out's.
      netDeliveriesPerSec: median(
        list.map((x) => {
          const fanoutSeconds = x.seconds - (p.writes * alone.ms) / 1000;
          return fanoutSeconds > 0 ? (p.streams * p.writes) / fanoutSeconds : Number.NaN;
        }),
      ),
      framesPerStream: median(list.map((x) => x.framesPerStream)),
      framesPerChunk: median(list.map((x) => x.framesPerChunk)),
      p50Ms: percentile(lat, 50),
      p99Ms: percentile(lat, 99),
      cpuUsPerWrite: cpuPerWrite,
      cpuUsPerDelivery: cpuPerWrite / p.streams,
      netCpuUsPerDelivery: (cpuPerWrite - alone.cpuUs) / p.streams,
      complete: list.every((x) => x.complete),
    };
  }
  return result;
};

export const scenarios: Record<string, Scenario> = {
  fanout,
  resources,
  slow,
  idle,
  open,
  passthrough,
  validation,
  disconnect,
  crossnode,
  tick,
};

// Run as the forked load process: one request in, one result out, then exit.
if (process.send !== undefined) {
  process.once('message', (message: LoadRequest) => {
    setTimeout(() => {
      process.send!({ ok: false, error: `load: ${message.scenario} exceeded ${message.timeoutMs} ms` });
      process.exit(4);
    }, message.timeoutMs).unref();
    const scenario = scenarios[message.scenario];
    if (scenario === undefined) {
      process.send!({ ok: false, error: `unknown scenario ${message.scenario}` });
      process.exit(2);
    }
    scenario(message.ports, message.targets, message.params, message.nodes).then(
      (result) => process.send!({ ok: true, result }, () => process.exit(0)),
      (error: unknown) =>
        process.send!(
          { ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) },
          () => process.exit(1),
        ),
    );
  });
}
