/**
 * The bus joins the hubs of several processes: an event published on one node reaches the streams of
 * every node, and a cancellation received by one node reaches the stream wherever it is held. One interface, an in-memory default here, a Redis bus in `mcp-subscriptions/redis`.
 */
import type { BusListener, BusMember, SubscriptionBus } from './types.ts';

/**
 * The default bus: hubs in one process. With a single hub it costs nothing per publish; with several
 * (one per tenant, or tests of several "nodes") it delivers synchronously to the others.
 */
export class MemoryBus implements SubscriptionBus {
  private readonly members = new Set<BusListener>();

  join(listener: BusListener): BusMember {
    // Each membership is its own object, so one hub joining twice is still two members.
    const member: BusListener = {
      event: (event, context) => listener.event(event, context),
      cancel: (principal, id) => listener.cancel(principal, id),
    };
    this.members.add(member);
    return {
      publish: (event, context) => {
        for (const other of this.members) if (other !== member) other.event(event, context);
      },
      cancel: (principal, id) => {
        for (const other of this.members) if (other !== member) other.cancel(principal, id);
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
