/** How the stuck run writes its figures: durations, sizes, rates, and the kernel's sockets. */
import { mib } from '../harness.ts';
import type { KernelSockets } from './kernel.ts';

export const ms = (value: number, digits = 1): string =>
  Number.isFinite(value) ? `${value.toFixed(digits)} ms` : 'n/a';
export const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KiB`;
export const signed = (bytes: number): string => `${bytes >= 0 ? '+' : '−'}${mib(Math.abs(bytes))}`;
export const perSecond = (n: number, ms: number): string => (ms > 0 ? (n / (ms / 1000)).toFixed(0) : 'n/a');

export const kernelText = (k: KernelSockets): string =>
  k.total === 0
    ? 'none'
    : `${Object.entries(k.byState)
        .map(([state, n]) => `${n} ${state}`)
        .join(', ')}; ${mib(k.sendQueued)} unsent`;
