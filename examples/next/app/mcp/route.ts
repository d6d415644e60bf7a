// The MCP endpoint: listen first (mcp-subscriptions/fetch), then the SDK's handler for everything else.
import { authInfoOf, callerOf, services } from '../../lib/services';

export const dynamic = 'force-dynamic';

function unauthorized(): Response {
  return Response.json(
    { error: 'unauthorized', message: 'Missing or unknown bearer token' },
    { status: 401, headers: { 'WWW-Authenticate': 'Bearer' } },
  );
}

async function serve(request: Request): Promise<Response> {
  const caller = callerOf(request);
  if (caller === undefined) return unauthorized();
  // A listen is answered here, as a streaming Response; anything else resolves undefined, its body unread.
  return (await services.listen(request)) ?? services.mcp.fetch(request, { authInfo: authInfoOf(caller) });
}

export { serve as GET, serve as POST, serve as DELETE };
