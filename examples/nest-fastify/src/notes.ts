import type { AuthInfo } from '@modelcontextprotocol/server';
import type { SubscriptionHub } from 'mcp-subscriptions';

/** A note's name: letters, digits, `_`, `.` and `-`, not starting with `.`. */
export const NOTE_NAME = /^\w[\w.-]{0,63}$/;

const NOTE_URI = /^note:\/\/(\w+)\/(\w[\w.-]{0,63})$/;

/** Who the caller is: the user your auth put in `req.auth.extra.sub` (where mcp-subscriptions looks too). */
export function principalOf(auth: AuthInfo | undefined): string | undefined {
  const sub = auth?.extra?.['sub'];
  return typeof sub === 'string' ? sub : undefined;
}

/** The one read rule, of `resources/read` and of every listen: a note is readable by its owner only. */
export function canRead(uri: string, { principal }: { readonly principal: string }): boolean {
  return NOTE_URI.exec(uri)?.[1] === principal;
}

/** Notes in memory, `note://<owner>/<name>`; every change is published through the hub. */
export class NotesService {
  readonly #texts = new Map<string, string>();
  readonly #hub: SubscriptionHub;

  constructor(hub: SubscriptionHub) {
    this.#hub = hub;
  }

  /** Creates or replaces `owner`'s note `name`, and tells its listeners; returns its URI. */
  save(owner: string, name: string, text: string): string {
    const uri = `note://${owner}/${name}`;
    this.#texts.set(uri, text);
    this.#hub.resourceUpdated(uri);
    return uri;
  }

  /** The note at `uri` if `principal` may read it; `undefined` if it is missing or not theirs alike. */
  read(uri: string, principal: string | undefined): string | undefined {
    return principal !== undefined && canRead(uri, { principal }) ? this.#texts.get(uri) : undefined;
  }
}
