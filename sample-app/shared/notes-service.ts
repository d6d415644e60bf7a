/**
 * The notes service: an in-memory store of `note://<owner>/<name>` resources, the read rule that
 * `resources/read` and every listen stream share, and the subscribe hook. Framework-free; it tells
 * listen streams about changes through the hub it is given.
 *
 * URIs are matched in one canonical form only, `note://<owner>/<name>` with both parts in a
 * restricted character set (see {@link OWNER_PATTERN} and {@link NAME_PATTERN}). Anything else,
 * including dot segments (`note://alice/../bob/x`), percent-encoding (`note://bob/%2e%2e/x`), extra
 * path segments, a query, a fragment, userinfo, a port or an upper-case scheme, is not a note: it is
 * unreadable, so it can never be used to reach another owner's note. Since the hub matches events to
 * subscriptions by exact string, and the service only ever publishes canonical URIs, the canonical
 * form is also the only one that receives events.
 */
import type { SubscriptionHub } from 'mcp-subscriptions';
import { SHARED_OWNER } from './auth.ts';
import { forbidden, notFound } from './errors.ts';
import { NAME_PATTERN, objectBody, OWNER_PATTERN, requiredString, segment } from './validation.ts';

/** The scheme and authority marker of every note URI. */
export const NOTE_URI_PREFIX = 'note://';

/** Longest note text accepted, in UTF-16 units. */
export const MAX_NOTE_TEXT = 65_536;

/** Where a note lives. */
export interface NoteRef {
  readonly owner: string;
  readonly name: string;
}

/** A stored note, as the REST API returns it. */
export interface Note extends NoteRef {
  readonly uri: string;
  readonly text: string;
  /** ISO 8601. */
  readonly createdAt: string;
  /** ISO 8601. */
  readonly updatedAt: string;
}

/** The URI of a note. `owner` and `name` must already be valid segments. */
export function noteUri(owner: string, name: string): string {
  return `${NOTE_URI_PREFIX}${owner}/${name}`;
}

/** Parses a canonical note URI; `undefined` for anything else (see the module comment). */
export function parseNoteUri(uri: string): NoteRef | undefined {
  if (!uri.startsWith(NOTE_URI_PREFIX)) return undefined;
  const rest = uri.slice(NOTE_URI_PREFIX.length);
  const slash = rest.indexOf('/');
  if (slash < 0) return undefined;
  const owner = rest.slice(0, slash);
  const name = rest.slice(slash + 1);
  return OWNER_PATTERN.test(owner) && NAME_PATTERN.test(name) ? { owner, name } : undefined;
}

/**
 * The read rule: may `principal` read `uri`? `note://<owner>/...` is readable by that owner only,
 * `note://shared/...` by every principal, anything else by nobody. Whether the note exists does not
 * matter, so that an answer never reveals it.
 *
 * This is the one read check of the app: `resources/read` and the listen handler's per-URI check
 * both call it.
 */
export function canRead(principal: string, uri: string): boolean {
  const ref = parseNoteUri(uri);
  return ref !== undefined && (ref.owner === principal || ref.owner === SHARED_OWNER);
}

/**
 * The subscribe hook: this app watches `note://` URIs only, so any other scheme is refused (and left
 * out of the acknowledgement). Runs after {@link canRead} passed.
 */
export function acceptsSubscription(uri: string): boolean {
  return uri.startsWith(NOTE_URI_PREFIX);
}

/** Whether `principal` may create, change and delete the notes of `owner`. */
export function canWrite(principal: string, owner: string): boolean {
  return owner === principal || owner === SHARED_OWNER;
}

/** The hub events the notes service emits. */
export type NoteEvents = Pick<SubscriptionHub, 'resourceUpdated' | 'resourcesListChanged'>;

function checkedRef(owner: unknown, name: unknown): NoteRef {
  return {
    owner: segment('owner', owner, OWNER_PATTERN, 'lowercase letters, digits, "_" or "-" (at most 64)'),
    name: segment('name', name, NAME_PATTERN, 'letters, digits, ".", "_" or "-", not starting with "." (at most 128)'),
  };
}

/**
 * The notes store. Every change validates, then authorizes, then applies, then emits: a refused
 * call changes nothing and emits nothing.
 *
 * @example
 * ```ts
 * const notes = new NotesService(hub);
 * notes.put('alice', 'alice', 'todo', { text: 'milk' }); // { created: true, note }
 * ```
 */
export class NotesService {
  private readonly notes = new Map<string, Note>();

  constructor(private readonly events: NoteEvents) {}

  /**
   * Creates or replaces a note. Create emits `resources/list_changed` and `resources/updated` for its
   * URI; update emits `resources/updated`. Throws a 400 for a bad segment or body, a 403 when
   * `principal` may not write `owner`'s notes.
   */
  put(principal: string, owner: unknown, name: unknown, body: unknown): { created: boolean; note: Note } {
    const ref = checkedRef(owner, name);
    if (!canWrite(principal, ref.owner)) throw forbidden(`Notes of \`${ref.owner}\` belong to another principal`);
    const text = requiredString(objectBody(body), 'text', MAX_NOTE_TEXT);
    const uri = noteUri(ref.owner, ref.name);
    const existing = this.notes.get(uri);
    const now = new Date().toISOString();
    const note: Note = Object.freeze({ ...ref, uri, text, createdAt: existing?.createdAt ?? now, updatedAt: now });
    this.notes.set(uri, note);
    if (existing === undefined) this.events.resourcesListChanged();
    this.events.resourceUpdated(uri);
    return { created: existing === undefined, note };
  }

  /**
   * Deletes a note; emits `resources/list_changed` and `resources/updated` for its URI. Throws a 400
   * for a bad segment, a 403 when `principal` may not write `owner`'s notes, a 404 when there is no
   * such note.
   */
  delete(principal: string, owner: unknown, name: unknown): void {
    const ref = checkedRef(owner, name);
    if (!canWrite(principal, ref.owner)) throw forbidden(`Notes of \`${ref.owner}\` belong to another principal`);
    const uri = noteUri(ref.owner, ref.name);
    if (!this.notes.delete(uri)) throw notFound(`No note at ${uri}`);
    this.events.resourcesListChanged();
    this.events.resourceUpdated(uri);
  }

  /** The note at a canonical URI, if any. Callers check {@link canRead} first. */
  get(uri: string): Note | undefined {
    return this.notes.get(uri);
  }

  /** Every note `principal` may read, in URI order. */
  readableBy(principal: string): Note[] {
    return [...this.notes.values()]
      .filter((note) => canRead(principal, note.uri))
      .sort((a, b) => (a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0));
  }
}
