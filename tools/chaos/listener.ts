/**
 * The chaos run's listen client: one POST per stream over node:http on loopback (a connection each),
 * its SSE body parsed as it arrives, every message stamped with the harness's clock into the stream's
 * record (checks.ts). It judges the library from outside, so it is not the package's own client.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { bearer } from '../../test/helpers/bearer.ts';
import { listenBody, listenHeaders, SseParser, type SseEvent } from '../../test/helpers/sse.ts';
import { notificationKey, type StreamRecord } from './checks.ts';
import { listKey, type ListKind } from './schedule.ts';

const ACK = 'notifications/subscriptions/acknowledged';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** A JSON object off the wire, read field by field. */
type Message = Record<string, unknown>;

const FLAGS: Readonly<Record<string, ListKind>> = {
  toolsListChanged: 'tools',
  promptsListChanged: 'prompts',
  resourcesListChanged: 'resources',
};

/** An open (or opening) listen stream and its record. */
export class Listener {
  private request: http.ClientRequest | undefined;
  /** Settles once the acknowledgement arrived, or the stream was refused or ended before it. */
  readonly acknowledged: Promise<void>;
  private settleAck!: () => void;

  constructor(
    readonly record: StreamRecord,
    private readonly url: string,
    private readonly token: string,
  ) {
    this.acknowledged = new Promise((resolve) => (this.settleAck = resolve));
  }

  /** Sends the listen request. */
  open(): void {
    const { record } = this;
    const notifications: Record<string, unknown> = {};
    for (const [flag, kind] of Object.entries(FLAGS)) if (record.asked.lists.includes(kind)) notifications[flag] = true;
    if (record.asked.uris.length > 0) notifications['resourceSubscriptions'] = [...record.asked.uris];
    const payload = JSON.stringify(listenBody(record.id, notifications));
    const request = http.request(this.url, {
      method: 'POST',
      headers: listenHeaders(bearer(this.token)),
      agent: false,
    });
    this.request = request;
    request.on('error', () => this.ended('lost'));
    request.on('response', (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        this.ended('refused');
        return;
      }
      const parser = new SseParser((event) => this.message(event));
      response.on('data', (chunk: Buffer) => parser.feed(chunk));
      response.on('end', () => this.ended('lost'));
      response.on('close', () => this.ended('lost'));
      response.on('error', () => this.ended('lost'));
    });
    request.end(payload);
  }

  /** The client hangs up (HTTP cancellation, spec §4). */
  close(): void {
    this.ended('closed');
    this.request?.destroy();
  }

  /** Acknowledged and not ended. */
  get isOpen(): boolean {
    return this.record.ackAt !== undefined && this.record.endAt === undefined;
  }

  private message(event: SseEvent): void {
    const at = performance.now();
    const { record } = this;
    if (record.endAt !== undefined) return;
    const json = event.json as Message | undefined;
    if (json === undefined || json['jsonrpc'] !== '2.0') {
      record.strange.push(`not JSON-RPC: ${event.data.slice(0, 200)}`);
      return;
    }
    const params = json['params'] as Message | undefined;
    const result = json['result'] as Message | undefined;
    const meta = (params ?? result)?.['_meta'] as Message | undefined;
    const tag = meta?.[SUBSCRIPTION_ID];
    if (tag !== record.id) record.strange.push(`tagged ${JSON.stringify(tag)}, not ${record.id}`);
    if ('id' in json) {
      if (json['id'] !== record.id || result?.['resultType'] !== 'complete') {
        record.strange.push(`a response that is not this stream's terminal result: ${event.data.slice(0, 200)}`);
      }
      this.ended('result', at);
      return;
    }
    const method = String(json['method']);
    if (method === ACK) {
      if (record.ackAt !== undefined) {
        record.strange.push('a second acknowledgement');
        return;
      }
      const honoured = (params?.['notifications'] ?? {}) as Record<string, unknown>;
      const uris = Array.isArray(honoured['resourceSubscriptions'])
        ? honoured['resourceSubscriptions'].map(String)
        : [];
      const lists = Object.entries(FLAGS)
        .filter(([flag]) => honoured[flag] === true)
        .map(([, kind]) => kind);
      record.ackAt = at;
      record.ackedUris = uris;
      record.honoured = [...lists.map(listKey), ...uris];
      this.settleAck();
      return;
    }
    if (record.ackAt === undefined) {
      record.strange.push(`${method} before the acknowledgement`);
      return;
    }
    record.received.push({ key: notificationKey(method, params), at });
  }

  private ended(how: NonNullable<StreamRecord['endedBy']>, at = performance.now()): void {
    const { record } = this;
    if (record.endAt === undefined) {
      record.endAt = at;
      record.endedBy = how;
    }
    this.settleAck();
  }
}
