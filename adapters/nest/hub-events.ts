/**
 * The hub in rxjs terms, for Nest code that works with Observables: its events as an Observable, and
 * an operator that publishes each event of a stream.
 */
import { map, Observable, type OperatorFunction } from 'rxjs';
import type { PublishReport, SubscriptionEvent, SubscriptionHub } from '../../lib/internal.ts';

/**
 * Every event the hub delivers (published on this node or arriving over its bus), task events
 * included, as a hot Observable: a subscriber sees the events published after it subscribed.
 * Unsubscribing detaches it from the hub.
 *
 * @example
 * ```ts
 * fromHub(hub)
 *   .pipe(filter((event) => event.kind === 'resource_updated'))
 *   .subscribe((event) => this.audit.record(event));
 * ```
 */
export function fromHub(hub: Pick<SubscriptionHub, 'subscribeAll'>): Observable<SubscriptionEvent> {
  return new Observable<SubscriptionEvent>((subscriber) => hub.subscribeAll((event) => subscriber.next(event)));
}

/**
 * An operator that publishes every event of the source through the hub and emits what happened on
 * this node. An invalid event (a relative URI, an unknown kind) errors the stream with the hub's
 * `EventError` (`code: 'ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT'`), so it reaches your error handler.
 *
 * @example
 * ```ts
 * this.notes.changes$
 *   .pipe(map((note) => ({ kind: 'resource_updated', uri: note.uri }) as const), publishTo(hub))
 *   .subscribe();
 * ```
 */
export function publishTo(hub: Pick<SubscriptionHub, 'publish'>): OperatorFunction<SubscriptionEvent, PublishReport> {
  return map((event) => hub.publish(event));
}
