// The hub's statistics: counts only (open streams, delivered, closed by reason), never a principal or a URI.
import { callerOf, services } from '../../../lib/services';

export const dynamic = 'force-dynamic';

export function GET(request: Request): Response {
  if (callerOf(request) === undefined) return Response.json({ error: 'unauthorized' }, { status: 401 });
  return Response.json(services.hub.stats());
}
