/**
 * What the sample apps offer on listen streams, declared once. The listen middleware honours exactly
 * this (its `capabilities` option) and the MCP server advertises exactly this in `server/discover`
 * (through `advertiseOffer(server, offer)`), so the two can never disagree.
 */
import { defineCapabilities } from 'mcp-subscriptions';

/** Every change notification the notes app can deliver, the Tasks extension included. */
export const offer = defineCapabilities({
  toolsListChanged: true,
  promptsListChanged: true,
  resourcesListChanged: true,
  resourceSubscriptions: true,
  tasks: true,
});
