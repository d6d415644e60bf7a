/**
 * What both samples' `main.ts` do alike: read the environment or stop with a message naming the
 * variable, print the one `listening on` line, and bound the shutdown.
 */
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig, type SampleConfig } from './config.ts';

/** The contract allows 5 s from the signal to exit; this leaves a margin for the process to end. */
export const SHUTDOWN_DEADLINE_MS = 4000;
/** How often idle keep-alive sockets are swept while the server drains. */
export const IDLE_SWEEP_MS = 50;

/** Prints `message` on stderr and exits 1. */
export function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

/** The configuration from `process.env`, or exit 1 with a line naming the bad variable. */
export function readConfigOrExit(): SampleConfig {
  try {
    return loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) fail(`Invalid configuration: ${error.message}`);
    throw error;
  }
}

/** The MCP endpoint's URL for the address the server listens on. */
export function mcpUrlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}/mcp`;
}
