/**
 * The notes service: `note://<owner>/<name>` resources in memory, and the one read rule that
 * `resources/read` and every listen stream share. It tells listen streams about changes through
 * the hub.
 */
import type { SubscriptionHub } from 'mcp-subscriptions';

/** A note's name: letters, digits, `_`, `.` and `-`, not starting with `.`. */
export const NOTE_NAME = /^\w[\w.-]{0,63}$/;

const NOTE_URI = /^note:\/\/(\w+)\/(\w[\w.-]{0,63})$/;

/** The read rule: a note is readable by its owner only. */
export function canRead(uri: string, { principal }: { readonly principal: string }): boolean {
  return NOTE_URI.exec(uri)?.[1] === principal;
}

export class NotesService {
  readonly #texts = new Map<string, string>();
  readonly #hub: SubscriptionHub;

  constructor(hub: SubscriptionHub) {
    this.#hub = hub;
  }

  /** Creates or replaces `owner`'s note `name` and tells the listen streams; returns its URI. */
  save(owner: string, name: string, text: string): string {
    const uri = `note://${owner}/${name}`;
    const created = !this.#texts.has(uri);
    this.#texts.set(uri, text);
    if (created) this.#hub.resourcesListChanged();
    this.#hub.resourceUpdated(uri);
    return uri;
  }

  /** The text of the note at `uri`, if there is one. Check {@link canRead} first. */
  read(uri: string): string | undefined {
    return this.#texts.get(uri);
  }

  /** The URIs of `owner`'s notes. */
  urisOf(owner: string): string[] {
    return [...this.#texts.keys()].filter((uri) => canRead(uri, { principal: owner }));
  }
}
