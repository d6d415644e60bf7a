/**
 * The PostgreSQL bus's channel names, derived as the Redis bus derives its own: `${prefix}:2:` and then
 * a list kind, or a key's kind and digest (a resource URI, a task id, a principal's cancellations), or
 * the channel of broadcast routing, or the resync channel every node of interest routing LISTENs to.
 * Every name fits PostgreSQL's 63-byte identifiers: the longest suffix is {@link MAX_SUFFIX_BYTES}
 * bytes, and the prefix is refused at construction when the two would not fit.
 */
import { createHash } from 'node:crypto';
import type { InterestKeyType, ListChangedKind } from '../../lib/internal.ts';

/** The channel suffix of each list kind. */
const LIST_SUFFIX: Record<ListChangedKind, string> = {
  tools_list_changed: 'tools',
  prompts_list_changed: 'prompts',
  resources_list_changed: 'resources',
};

/** The characters of a key's digest in a channel name. */
export const DIGEST_LENGTH = 22;

/** The longest suffix after the prefix, in bytes: `:2:u:` and a digest. */
export const MAX_SUFFIX_BYTES = ':2:u:'.length + DIGEST_LENGTH;

/** The longest `channelPrefix`, in UTF-8 bytes: PostgreSQL keeps 63 bytes of an identifier. */
export const MAX_CHANNEL_PREFIX_BYTES = 63 - MAX_SUFFIX_BYTES;

/**
 * A key's digest in a channel name: 22 base64url characters of its SHA-256 (132 bits), as on Redis.
 * Channel names stay short whatever the URI's length and carry no URI, task id or principal (which
 * `pg_stat_activity` and server logs could show).
 */
export function digest(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, DIGEST_LENGTH);
}

/** The channels of one prefix. */
export class Channels {
  /** `${prefix}:2:`: how every channel starts. */
  readonly base: string;
  /** The channel of `'broadcast'` routing. */
  readonly all: string;
  /** The channel every node of interest routing LISTENs to for a resync of everything. */
  readonly resync: string;
  private readonly lists: Record<ListChangedKind, string>;

  constructor(
    prefix: string,
    private readonly broadcast: boolean,
  ) {
    this.base = `${prefix}:2:`;
    this.all = `${this.base}all`;
    this.resync = broadcast ? this.all : `${this.base}resync`;
    this.lists = {
      tools_list_changed: `${this.base}l:${LIST_SUFFIX.tools_list_changed}`,
      prompts_list_changed: `${this.base}l:${LIST_SUFFIX.prompts_list_changed}`,
      resources_list_changed: `${this.base}l:${LIST_SUFFIX.resources_list_changed}`,
    };
  }

  /** The channel of a list kind. */
  list(kind: ListChangedKind): string {
    return this.broadcast ? this.all : this.lists[kind];
  }

  /** The channel of a resource URI (`u`), a task id (`t`) or a principal's cancellations (`c`). */
  key(type: 'u' | 't' | 'c', key: string): string {
    return this.broadcast ? this.all : `${this.base}${type}:${digest(`${type}:${key}`)}`;
  }

  /** The channel of a key of the interest reconciler. */
  of(type: InterestKeyType, key: string): string {
    return type === 'l' ? this.list(key as ListChangedKind) : this.key(type, key);
  }
}
