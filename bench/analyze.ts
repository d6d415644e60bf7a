/**
 * Summarizes what `npm run bench -- --profile` leaves in `bench/results/profiles/`:
 *
 * - `analyze.ts server.cpuprofile [filter]`: self time per function, top 30 (optionally only
 *   functions whose name or file contains `filter`, and their sum);
 * - `analyze.ts before.heapsnapshot after.heapsnapshot [per]`: what the heap gained between two
 *   snapshots, by constructor, top 30, divided by `per` (e.g. the streams opened in between).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

function cpu(file: string, filter: string | undefined): void {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as {
    nodes: ProfileNode[];
    startTime: number;
    endTime: number;
    samples: number[];
  };
  const interval = (profile.endTime - profile.startTime) / Math.max(1, profile.samples.length);
  const self = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url.replace(/^.*\/(node_modules|work\/main)\//, '');
    const key = `${functionName || '(anonymous)'}  ${where}:${lineNumber + 1}`;
    const us = (node.hitCount ?? 0) * interval;
    total += us;
    self.set(key, (self.get(key) ?? 0) + us);
  }
  const rows = [...self].filter(([key]) => filter === undefined || key.includes(filter)).sort((a, b) => b[1] - a[1]);
  console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`);
  if (filter !== undefined) {
    const matched = rows.reduce((sum, [, us]) => sum + us, 0);
    console.log(`matching "${filter}": ${(matched / 1000).toFixed(1)} ms (${((matched / total) * 100).toFixed(2)}%)`);
  }
  for (const [key, us] of rows.slice(0, 30)) {
    console.log(`${(us / 1000).toFixed(1).padStart(9)} ms ${((us / total) * 100).toFixed(1).padStart(5)}%  ${key}`);
  }
}

function heapClasses(file: string): Map<string, { count: number; size: number }> {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const out = new Map<string, { count: number; size: number }>();
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt] as number] ?? '?';
    const raw = snapshot.strings[snapshot.nodes[i + nameAt] as number] ?? '?';
    const name = type === 'object' || type === 'closure' || type === 'native' ? raw : `(${type})`;
    const key = `${type === 'closure' ? 'closure ' : ''}${name.slice(0, 80)}`;
    const entry = out.get(key) ?? { count: 0, size: 0 };
    entry.count++;
    entry.size += snapshot.nodes[i + sizeAt] as number;
    out.set(key, entry);
  }
  return out;
}

function heapDiff(before: string, after: string, per: number): void {
  const a = heapClasses(before);
  const b = heapClasses(after);
  const rows: [string, number, number][] = [];
  let total = 0;
  for (const [key, entry] of b) {
    const old = a.get(key) ?? { count: 0, size: 0 };
    const size = entry.size - old.size;
    total += size;
    rows.push([key, (entry.count - old.count) / per, size / per]);
  }
  rows.sort((x, y) => y[2] - x[2]);
  console.log(`heap gained ${(total / per).toFixed(0)} bytes per unit (÷${per}), by constructor:`);
  console.log('    bytes   count  constructor');
  for (const [key, count, size] of rows.slice(0, 30)) {
    console.log(`${size.toFixed(0).padStart(9)} ${count.toFixed(2).padStart(7)}  ${key}`);
  }
}

const [first, second, third] = process.argv.slice(2);
if (first?.endsWith('.cpuprofile')) cpu(first, second);
else if (first?.endsWith('.heapsnapshot') && second?.endsWith('.heapsnapshot'))
  heapDiff(first, second, Number(third ?? 1));
else {
  console.error('usage: analyze.ts FILE.cpuprofile [filter] | BEFORE.heapsnapshot AFTER.heapsnapshot [per]');
  process.exit(2);
}
