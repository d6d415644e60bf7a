/**
 * What the three benchmark servers and the load generator agree on: the listen request (identical
 * bytes for every server), the bearer token, the note URIs, and the SSE frames the ceiling writes
 * (byte for byte what the engine and the SDK write).
 */

/** The bearer token of the principal every benchmark request acts as (the sample app's `alice`). */
export const TOKEN = 'alice-token';
export const PRINCIPAL = 'alice';
export const PROTOCOL_VERSION = '2026-07-28';
export const SUBSCRIPTION_ID_META_KEY = 'io.modelcontextprotocol/subscriptionId';

/** The `i`th note URI of the benchmark: readable by {@link PRINCIPAL}, accepted by the subscribe hook. */
export function noteUri(i: number): string {
  return `note://alice/n${i}`;
}

/** The headers of a listen POST (spec §5), the same for every server. */
export function listenHeaders(body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': 'subscriptions/listen',
    authorization: `Bearer ${TOKEN}`,
    'content-length': String(Buffer.byteLength(body)),
  };
}

/** The filter of one listen request. */
export interface Filter {
  toolsListChanged?: boolean;
  resourceSubscriptions?: string[];
}

/** A listen request body as sent on the wire. */
export function listenBody(id: string, notifications: Filter): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': {},
      },
      notifications,
    },
  });
}

/** A non-listen MCP request (`tools/list`), with its headers. */
export function toolsListRequest(id: number): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/list',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  });
  return {
    body,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': 'tools/list',
      authorization: `Bearer ${TOKEN}`,
      'content-length': String(Buffer.byteLength(body)),
    },
  };
}

// The ceiling's frames: the bytes the engine's `eventFrame()`/`ackFrame()` and the SDK produce.
const FRAME_HEAD = 'event: message\ndata: ';
const FRAME_TAIL = '\n\n';
const ID_META_OPEN = `"_meta":{"${SUBSCRIPTION_ID_META_KEY}":`;

/** The acknowledgement frame of a stream. */
export function ackFrame(idJson: string, honored: Filter): string {
  return `${FRAME_HEAD}{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{${ID_META_OPEN}${idJson}},"notifications":${JSON.stringify(honored)}}}${FRAME_TAIL}`;
}

/** An event frame split around the subscription id: `head + idJson + tail`. */
export interface SplitFrame {
  readonly head: string;
  readonly tail: string;
}

export const TOOLS_FRAME: SplitFrame = {
  head: `${FRAME_HEAD}{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{${ID_META_OPEN}`,
  tail: `}}}${FRAME_TAIL}`,
};

export function resourceFrame(uri: string): SplitFrame {
  return {
    head: `${FRAME_HEAD}{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":${JSON.stringify(uri)},${ID_META_OPEN}`,
    tail: `}}}${FRAME_TAIL}`,
  };
}

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache, no-transform',
  'X-Accel-Buffering': 'no',
  Connection: 'keep-alive',
};

export const KEEPALIVE_FRAME = ': keepalive\n\n';
