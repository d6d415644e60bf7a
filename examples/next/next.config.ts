import type { NextConfig } from 'next';

const config: NextConfig = {
  // Loaded from node_modules as they are, not bundled: one copy of the hub's module for every route.
  serverExternalPackages: ['mcp-subscriptions', '@modelcontextprotocol/server'],
  // This folder is the app, whatever lockfiles the folders above it hold.
  outputFileTracingRoot: process.cwd(),
  turbopack: { root: process.cwd() },
};

export default config;
