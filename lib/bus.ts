/**
 * The bus joins the hubs of several processes: an event published on one node reaches the streams of
 * every node. One interface, an in-memory default here, a Redis bus in `mcp-subscriptions/redis`.
 */
import type { BusMember, SubscriptionBus, SubscriptionEvent } from './types.ts';

/**
 * The default bus: hubs in one process. With a single hub it costs nothing per publish; with several
 * (one per tenant, or tests of several "nodes") it delivers synchronously to the others.
 */
export class MemoryBus implements SubscriptionBus {
  private readonly members = new Set<(event: SubscriptionEvent) => void>();

  join(onEvent: (event: SubscriptionEvent) => void): BusMember {
    // Each membership is its own function, so one hub joining twice is still two members.
    const member = (event: SubscriptionEvent): void => onEvent(event);
    this.members.add(member);
    return {
      publish: (event) => {
        for (const other of this.members) if (other !== member) other(event);
      },
      leave: () => {
        this.members.delete(member);
      },
    };
  }

  /** How many hubs have joined. */
  get size(): number {
    return this.members.size;
  }
}
