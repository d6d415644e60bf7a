/**
 * A bus of one member that routes by interest, for unit tests of the hub and the listen engine: it
 * records what the hub tells it (follow, unfollow, cancel), lets the test decide when a follow is done,
 * and hands the test the hub's listener, to deliver what another node would send.
 */
import type { BusInterest, BusListener, RequestId, SubscriptionBus } from 'mcp-subscriptions';

export interface FollowingBus {
  readonly bus: SubscriptionBus;
  /** Every follow and unfollow of a stream's interest, in order. */
  readonly calls: { what: 'follow' | 'unfollow'; interest: BusInterest }[];
  /**
   * Every follow and unfollow of a principal's cancellations alone (a listen waiting to open holds
   * them), in order: kept apart from {@link calls}, and never held back by the gate.
   */
  readonly cancelFollows: { what: 'follow' | 'unfollow'; interest: BusInterest }[];
  /** Every cancellation the hub handed to the bus (for the other nodes). */
  readonly cancels: { principal: string; id: RequestId }[];
  /** Settles the follows made so far and those to come, until {@link reset}. */
  readonly open: () => void;
  /** Makes the follows from now on wait for the next {@link open}. */
  readonly reset: () => void;
  /** What the hub joined with: `listener().cancel(principal, id)` is a cancellation from another node. */
  readonly listener: () => BusListener;
}

export function followingBus(): FollowingBus {
  const calls: FollowingBus['calls'] = [];
  const cancelFollows: FollowingBus['cancelFollows'] = [];
  const cancelsOnly = (interest: BusInterest): boolean =>
    interest.lists.length === 0 && interest.uris.length === 0 && interest.taskIds.length === 0;
  const cancels: FollowingBus['cancels'] = [];
  let joined: BusListener | undefined;
  let resolveGate!: () => void;
  let gate!: Promise<void>;
  const reset = (): void => {
    gate = new Promise<void>((resolve) => (resolveGate = resolve));
  };
  reset();
  const bus: SubscriptionBus = {
    join: (listener) => {
      joined = listener;
      return {
        publish: () => {},
        cancel: (principal, id) => void cancels.push({ principal, id }),
        leave: () => {},
        follow: (interest) => {
          if (cancelsOnly(interest)) {
            cancelFollows.push({ what: 'follow', interest });
            return;
          }
          calls.push({ what: 'follow', interest });
          return gate;
        },
        unfollow: (interest) =>
          void (cancelsOnly(interest) ? cancelFollows : calls).push({ what: 'unfollow', interest }),
      };
    },
  };
  return {
    bus,
    calls,
    cancelFollows,
    cancels,
    open: () => resolveGate(),
    reset,
    listener: () => {
      if (joined === undefined) throw new Error('no hub joined this bus');
      return joined;
    },
  };
}
