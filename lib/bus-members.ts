/**
 * The hubs that joined one bus node, and the handing of what the node receives to them: what every
 * engine (Redis, PostgreSQL) needs alike. A member that throws is logged and does not keep the others
 * from their share.
 */
import type { GapKeys } from './interest.ts';
import type { BusListener, EventContext, Logger, RequestId, SubscriptionEvent } from './types.ts';

export class BusMembers {
  private readonly members = new Set<BusListener>();

  constructor(private readonly logger: Logger) {}

  /**
   * A membership of its own for `listener`, not yet added: one hub joining twice is two members. A bus
   * adds it unless it is closing.
   */
  wrap(listener: BusListener): BusListener {
    return {
      event: (event, context) => listener.event(event, context),
      cancel: (principal, id) => listener.cancel(principal, id),
      resync: (keys) => listener.resync?.(keys),
    };
  }

  add(member: BusListener): void {
    this.members.add(member);
  }

  has(member: BusListener): boolean {
    return this.members.has(member);
  }

  delete(member: BusListener): void {
    this.members.delete(member);
  }

  clear(): void {
    this.members.clear();
  }

  /** Hands `event` to every member but `except` (the one that published it). */
  event(event: SubscriptionEvent, context: EventContext | undefined, except?: BusListener): void {
    for (const member of this.members) {
      if (member === except) continue;
      try {
        member.event(event, context);
      } catch (error) {
        this.logger.error('a bus member failed to take an event', { error });
      }
    }
  }

  /** Hands a cancellation to every member but `except` (the one that sent it). */
  cancel(principal: string, id: RequestId, except?: BusListener): void {
    for (const member of this.members) {
      if (member === except) continue;
      try {
        member.cancel(principal, id);
      } catch (error) {
        this.logger.error('a bus member failed to take a cancellation', { error });
      }
    }
  }

  /** Tells every member that `keys` (or every key) may have changed during a gap. */
  resync(keys: GapKeys | 'all'): void {
    for (const member of this.members) {
      try {
        member.resync?.(keys);
      } catch (error) {
        this.logger.error('a bus member failed to take a resync', { error });
      }
    }
  }
}
