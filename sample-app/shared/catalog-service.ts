/**
 * The catalog service: stands for the host changing what it offers (deploying a tool, editing a
 * prompt, adding a resource). Each change tells the listen streams that asked for that list.
 */
import type { SubscriptionHub } from 'mcp-subscriptions';

/** The hub events the catalog service emits. */
export type CatalogEvents = Pick<SubscriptionHub, 'toolsListChanged' | 'promptsListChanged' | 'resourcesListChanged'>;

/** The catalogs a host can change, and the notification each change is sent as. */
export const CATALOGS = Object.freeze({
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
});

/** The name of a catalog. */
export type CatalogName = keyof typeof CATALOGS;

/** Whether `name` names a catalog. */
export function isCatalogName(name: string): name is CatalogName {
  return Object.hasOwn(CATALOGS, name);
}

/**
 * Emits a catalog's list change.
 *
 * @example
 * ```ts
 * new CatalogService(hub).changed('tools'); // notifications/tools/list_changed
 * ```
 */
export class CatalogService {
  constructor(private readonly events: CatalogEvents) {}

  /** Records that catalog `name` changed; returns the notification method sent. */
  changed(name: CatalogName): string {
    switch (name) {
      case 'tools':
        this.events.toolsListChanged();
        break;
      case 'prompts':
        this.events.promptsListChanged();
        break;
      case 'resources':
        this.events.resourcesListChanged();
        break;
    }
    return CATALOGS[name];
  }
}
