// Stands for the app's own services changing something: every listen stream following tool-list
// changes hears of it.
import { callerOf, services } from '../../../lib/services';

export const dynamic = 'force-dynamic';

export function POST(request: Request): Response {
  if (callerOf(request) === undefined) return Response.json({ error: 'unauthorized' }, { status: 401 });
  return Response.json({ notified: services.hub.toolsListChanged() }, { status: 202 });
}
