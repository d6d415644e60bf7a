/**
 * Who a stream belongs to, when the caller has no principal. A leaf module.
 *
 * An anonymous caller cannot prove that two requests are its own, so each anonymous listen gets an
 * identity of its own, unguessable and used once: no other request can cancel its stream or share
 * its tasks. The identities start with a NUL character, which no principal may contain (the adapters
 * refuse one that does), so no user, not even one whose id is `anonymous`, can collide with them.
 * Limits treat every anonymous stream of a node as one principal: {@link quotaKey}.
 */
import { randomUUID } from 'node:crypto';

/** The per-principal limit's key for every anonymous stream: one group. */
export const ANONYMOUS_GROUP = '\u0000anonymous';

/** A fresh identity for one anonymous listen request. */
export function anonymousPrincipal(): string {
  return `${ANONYMOUS_GROUP}\u0000${randomUUID()}`;
}

/** Whether a principal is one of {@link anonymousPrincipal}'s identities. */
export function isAnonymous(principal: string): boolean {
  return principal.charCodeAt(0) === 0;
}

/** The key a principal is counted under by the per-principal limit: anonymous streams share one. */
export function quotaKey(principal: string): string {
  return isAnonymous(principal) ? ANONYMOUS_GROUP : principal;
}
