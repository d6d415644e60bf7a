/**
 * Request validation (spec §6): each check's JSON-RPC code, HTTP status, echoed id and message, and the
 * order the checks run in. Expected values come from the spec's table, not from the implementation.
 */
import { describe, expect, test } from '@jest/globals';
import {
  ErrorCode,
  hasErrorCode,
  isAbsoluteUri,
  parseJsonBody,
  parseListenRequest,
  ProtocolError,
  REFUSAL_STATUS,
  refusalStatus,
  routeOf,
  type HeaderBag,
  type ParseOptions,
  type RefusalReason,
} from '../../lib/internal.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

const TASKS = 'io.modelcontextprotocol/tasks';
const options: ParseOptions = { protocolVersions: ['2026-07-28'], maxFilterEntries: 1000, tasksEnabled: false };
const withTasks: ParseOptions = { ...options, tasksEnabled: true };

/** Runs `fn`, asserts it refused the request with a ProtocolError, and returns the error. */
function refusal(fn: () => unknown): ProtocolError {
  try {
    fn();
  } catch (error) {
    // expected a protocol error (the error itself shows in a failure)
    expect([String(error), hasErrorCode(error, ErrorCode.Protocol)]).toStrictEqual([String(error), true]);
    return error as ProtocolError;
  }
  throw new Error('expected the request to be refused');
}

function refuse(body: unknown, headers: HeaderBag = listenHeaders(), opts: ParseOptions = options): ProtocolError {
  return refusal(() => parseListenRequest(body, headers, opts));
}

function taskCapabilities() {
  return { 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } };
}

describe('spec §6 HTTP statuses', () => {
  test('every pre-stream error code maps to the status the spec table gives', () => {
    // One refusal per reason, as the engine raises it: its JSON-RPC code and its HTTP status.
    const row = (reason: RefusalReason) => {
      const error = new ProtocolError(reason, 'x');
      return [error.rpcCode, refusalStatus(error)];
    };
    expect(row('parse-error')).toStrictEqual([-32700, 400]);
    expect(row('invalid-request')).toStrictEqual([-32600, 400]);
    expect(row('invalid-params')).toStrictEqual([-32602, 400]);
    expect(row('header-mismatch')).toStrictEqual([-32020, 400]);
    expect(row('unsupported-protocol-version')).toStrictEqual([-32022, 400]);
    expect(row('method-not-found')).toStrictEqual([-32601, 404]);
    expect(row('missing-capability')).toStrictEqual([-32021, 400]);
    expect(row('capacity')).toStrictEqual([-32603, 503]);
    // The HTTP layer's own refusals, and the one failure that is ours.
    expect(row('unsupported-media-type')).toStrictEqual([-32600, 415]);
    expect(row('not-acceptable')).toStrictEqual([-32600, 406]);
    expect(row('body-too-large')).toStrictEqual([-32600, 413]);
    expect(row('shutting-down')).toStrictEqual([-32603, 503]);
    expect(row('draining')).toStrictEqual([-32603, 503]);
    expect(row('internal')).toStrictEqual([-32603, 500]);
    // Every reason has its row: the table in lib/http.ts is the only one.
    expect(Object.keys(REFUSAL_STATUS).sort()).toStrictEqual(
      [
        'parse-error',
        'invalid-request',
        'invalid-params',
        'header-mismatch',
        'unsupported-protocol-version',
        'method-not-found',
        'missing-capability',
        'capacity',
        'draining',
        'unsupported-media-type',
        'not-acceptable',
        'body-too-large',
        'shutting-down',
        'internal',
      ].sort(),
    );
  });
});

describe('parseJsonBody', () => {
  test('a body that is not JSON is -32700 with a null id', () => {
    for (const text of ['{', '', 'listen please', '{"jsonrpc":"2.0",}']) {
      const error = refusal(() => parseJsonBody(text));
      expect(error.rpcCode).toBe(-32700);
      expect(refusalStatus(error)).toBe(400);
      expect(error.id).toBe(null);
    }
  });

  test('JSON text of any shape parses (shape is the next check)', () => {
    expect(parseJsonBody('[1,2]')).toStrictEqual([1, 2]);
    expect(parseJsonBody('null')).toBe(null);
  });
});

describe('parseListenRequest: one check at a time', () => {
  test('a well-formed request yields its id, version and requested filter', () => {
    const parsed = parseListenRequest(
      listenBody('listen-1', { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] }),
      listenHeaders(),
      options,
    );
    expect(parsed).toStrictEqual({
      id: 'listen-1',
      protocolVersion: '2026-07-28',
      filter: { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] },
    });
  });

  test('0 and "" are valid ids, kept verbatim', () => {
    expect(parseListenRequest(listenBody(0, {}), listenHeaders(), options).id).toBe(0);
    expect(parseListenRequest(listenBody('', {}), listenHeaders(), options).id).toBe('');
    expect(parseListenRequest(listenBody(-7.5, {}), listenHeaders(), options).id).toBe(-7.5);
  });

  test('clientInfo is optional and an empty clientCapabilities declares none', () => {
    const body = listenBody(1, { toolsListChanged: true });
    expect('io.modelcontextprotocol/clientInfo' in body.params._meta).toBe(false);
    expect(parseListenRequest(body, listenHeaders(), options).filter).toStrictEqual({ toolsListChanged: true });
    const withInfo = listenBody(2, {}, { 'io.modelcontextprotocol/clientInfo': { name: 'c', version: '1' } });
    expect(parseListenRequest(withInfo, listenHeaders(), options).id).toBe(2);
  });

  test('anything but a single request object is -32600 with a null id', () => {
    for (const body of [null, 42, 'subscriptions/listen', true]) {
      const error = refuse(body);
      expect(error.rpcCode).toBe(-32600);
      expect(refusalStatus(error)).toBe(400);
      expect(error.id).toBe(null);
    }
    const batch = refuse([listenBody(1, {})]);
    expect(batch.rpcCode).toBe(-32600);
    expect(batch.message).toMatch(/batch/i);
  });

  test('a wrong or missing jsonrpc version is -32600 and echoes the id', () => {
    for (const jsonrpc of [undefined, '1.0', 2]) {
      const error = refuse({ ...listenBody('a', {}), jsonrpc });
      expect(error.rpcCode).toBe(-32600);
      expect(error.id).toBe('a');
      expect(error.message).toMatch(/jsonrpc/);
    }
  });

  test('a missing or non-scalar id is -32600: listen is a request, not a notification', () => {
    for (const id of [undefined, null, {}, [1], true]) {
      const error = refuse({ ...listenBody('x', {}), id });
      expect(error.rpcCode).toBe(-32600);
      expect(error.id).toBe(null);
      expect(error.message).toMatch(/`id`/);
    }
  });

  test('a method that is not a string, or params that are not an object, is -32600', () => {
    const method = refuse({ ...listenBody(3, {}), method: 7 });
    expect(method.rpcCode).toBe(-32600);
    expect(method.message).toMatch(/`method`/);
    for (const params of [[], 'p', 5]) {
      const error = refuse({ ...listenBody(3, {}), params });
      expect(error.rpcCode).toBe(-32600);
      expect(error.id).toBe(3);
      expect(error.message).toMatch(/`params`/);
    }
  });

  test('missing _meta, protocol version or client capabilities is -32602 naming what is missing', () => {
    const noParams = refuse({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen' });
    expect(noParams.rpcCode).toBe(-32602);
    expect(noParams.message).toMatch(/_meta/);

    const noMeta = listenBody(1, {}) as any;
    delete noMeta.params._meta;
    expect(refuse(noMeta).message).toMatch(/_meta/);

    const noVersion = listenBody(1, {}) as any;
    delete noVersion.params._meta['io.modelcontextprotocol/protocolVersion'];
    const versionError = refuse(noVersion);
    expect(versionError.rpcCode).toBe(-32602);
    expect(refusalStatus(versionError)).toBe(400);
    expect(versionError.message).toMatch(/protocolVersion/);

    const noCaps = listenBody(1, {}) as any;
    delete noCaps.params._meta['io.modelcontextprotocol/clientCapabilities'];
    const capsError = refuse(noCaps);
    expect(capsError.rpcCode).toBe(-32602);
    expect(capsError.message).toMatch(/clientCapabilities/);

    const nullCaps = refuse(listenBody(1, {}, { 'io.modelcontextprotocol/clientCapabilities': null }));
    expect(nullCaps.rpcCode).toBe(-32602);
  });

  test('MCP-Protocol-Version missing or different from the body is -32020', () => {
    const headers = listenHeaders();
    const { 'mcp-protocol-version': _omit, ...noVersion } = headers;
    const missing = refuse(listenBody('m', {}), noVersion);
    expect(missing.rpcCode).toBe(-32020);
    expect(refusalStatus(missing)).toBe(400);
    expect(missing.id).toBe('m');
    expect(missing.message).toMatch(/MCP-Protocol-Version/);

    const different = refuse(listenBody('m', {}), listenHeaders({ 'mcp-protocol-version': '2025-11-25' }));
    expect(different.rpcCode).toBe(-32020);
    expect(different.message).toMatch(/MCP-Protocol-Version/);
  });

  test('Mcp-Method missing or different from the body is -32020', () => {
    const { 'mcp-method': _omit, ...noMethod } = listenHeaders();
    const missing = refuse(listenBody('m', {}), noMethod);
    expect(missing.rpcCode).toBe(-32020);
    expect(missing.message).toMatch(/Mcp-Method/);

    const different = refuse(listenBody('m', {}), listenHeaders({ 'mcp-method': 'tools/list' }));
    expect(different.rpcCode).toBe(-32020);
    expect(different.message).toMatch(/Mcp-Method/);
  });

  test('Mcp-Method given more than once (an array, or values Node joined) is -32020, even when each names listen', () => {
    for (const twice of [
      ['subscriptions/listen', 'subscriptions/listen'],
      'subscriptions/listen, subscriptions/listen',
    ]) {
      const error = refuse(listenBody('m', {}), { ...listenHeaders(), 'mcp-method': twice });
      expect(error.rpcCode).toBe(-32020);
      expect(error.message).toBe(
        'Header mismatch: the Mcp-Method header must be sent once, naming the body `method` only',
      );
    }
  });

  test('routeOf: whatever names listen, in the body (a batch too) or anywhere in Mcp-Method, is listen', () => {
    const listen = listenBody('r', {});
    const tools = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'r' } };
    expect(routeOf(listen, { 'mcp-method': 'tools/call' })).toBe('listen');
    expect(routeOf([tools, listen], { 'mcp-method': 'tools/list' })).toBe('listen');
    expect(routeOf(undefined, { 'mcp-method': 'tools/call, subscriptions/listen' })).toBe('listen');
    expect(routeOf(tools, { 'mcp-method': ['tools/list', 'subscriptions/listen'] })).toBe('listen');
    expect(routeOf(cancel, {})).toBe('cancelled');
    expect(routeOf(tools, { 'mcp-method': 'tools/list' })).toBe('other');
    expect(routeOf([tools], {})).toBe('other');
    expect(routeOf(undefined, { 'mcp-method': 'subscriptions/listening' })).toBe('other');
  });

  test('an unsupported protocol version is -32022 with the supported and requested versions in data', () => {
    const body = listenBody('v', {}, { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' });
    const error = refuse(body, listenHeaders({ 'mcp-protocol-version': '2025-11-25' }));
    expect(error.rpcCode).toBe(-32022);
    expect(refusalStatus(error)).toBe(400);
    expect(error.id).toBe('v');
    expect(error.data).toStrictEqual({ supported: ['2026-07-28'], requested: '2025-11-25' });
  });

  test('a method other than listen reaching the engine is -32601 with HTTP 404', () => {
    const body = { ...listenBody('q', {}), method: 'subscriptions/subscribe' };
    const error = refuse(body, listenHeaders({ 'mcp-method': 'subscriptions/subscribe' }));
    expect(error.rpcCode).toBe(-32601);
    expect(refusalStatus(error)).toBe(404);
    expect(error.id).toBe('q');
  });

  test('taskIds without the Tasks extension declared is -32021 with the required capability in data', () => {
    const error = refuse(listenBody('t', { taskIds: ['task-1'] }), listenHeaders(), withTasks);
    expect(error.rpcCode).toBe(-32021);
    expect(refusalStatus(error)).toBe(400);
    expect(error.id).toBe('t');
    expect(error.data).toStrictEqual({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
    // Declared on this very request: accepted.
    const parsed = parseListenRequest(
      listenBody('t', { taskIds: ['task-1'] }, taskCapabilities()),
      listenHeaders(),
      withTasks,
    );
    expect(parsed.filter).toStrictEqual({ taskIds: ['task-1'] });
  });

  test('taskIds on a server without the Tasks extension is an unknown field: ignored, not an error', () => {
    const parsed = parseListenRequest(
      listenBody('t', { taskIds: ['task-1'], toolsListChanged: true }),
      listenHeaders(),
      options,
    );
    expect(parsed.filter).toStrictEqual({ toolsListChanged: true });
  });

  test('notifications missing or not an object is -32602 naming it', () => {
    for (const notifications of [undefined, null, [], 'all', true]) {
      const error = refuse(listenBody('n', notifications as any));
      expect(error.rpcCode).toBe(-32602);
      expect(refusalStatus(error)).toBe(400);
      expect(error.id).toBe('n');
      expect(error.message).toMatch(/notifications/);
    }
  });

  test('a list flag that is not a boolean is -32602 naming the flag', () => {
    for (const flag of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) {
      for (const value of ['true', 1, null, {}]) {
        const error = refuse(listenBody('f', { [flag]: value }));
        expect(error.rpcCode).toBe(-32602);
        expect(error.message).toContain(flag); // the message should name the flag
      }
    }
  });

  test('false flags are "not wanted" and unknown fields are not honoured', () => {
    const parsed = parseListenRequest(
      listenBody('f', {
        toolsListChanged: false,
        promptsListChanged: true,
        futureField: true,
        resourceTemplates: ['x'],
      }),
      listenHeaders(),
      options,
    );
    expect(parsed.filter).toStrictEqual({ promptsListChanged: true });
  });

  test('resourceSubscriptions must be an array of absolute URI strings; the error names the field and index', () => {
    const notArray = refuse(listenBody('r', { resourceSubscriptions: 'note://a' }));
    expect(notArray.rpcCode).toBe(-32602);
    expect(notArray.message).toMatch(/resourceSubscriptions/);

    const notString = refuse(listenBody('r', { resourceSubscriptions: ['note://a', 7] }));
    expect(notString.rpcCode).toBe(-32602);
    expect(notString.message).toMatch(/resourceSubscriptions\[1\]/);

    const relative = refuse(listenBody('r', { resourceSubscriptions: ['note://a', 'note://b', 'todo.txt'] }));
    expect(relative.rpcCode).toBe(-32602);
    expect(relative.message).toMatch(/resourceSubscriptions\[2\]/);
    expect(relative.message).toMatch(/absolute URI/);
    // The message names the position, never echoes the rejected value back.
    expect(relative.message.includes('todo.txt')).toBe(false);
  });

  test('taskIds must be an array of non-empty strings', () => {
    const body = (taskIds: unknown) => listenBody('t', { taskIds }, taskCapabilities());
    expect(refuse(body('task-1'), listenHeaders(), withTasks).message).toMatch(/taskIds/);
    expect(refuse(body(['ok', 3]), listenHeaders(), withTasks).message).toMatch(/taskIds\[1\]/);
    const empty = refuse(body(['']), listenHeaders(), withTasks);
    expect(empty.rpcCode).toBe(-32602);
    expect(empty.message).toMatch(/taskIds\[0\]/);
  });

  test('duplicates collapse in request order and an empty list is omitted', () => {
    const parsed = parseListenRequest(
      listenBody('d', { resourceSubscriptions: ['note://b', 'note://a', 'note://b', 'note://a', 'note://c'] }),
      listenHeaders(),
      options,
    );
    expect(parsed.filter.resourceSubscriptions).toStrictEqual(['note://b', 'note://a', 'note://c']);
    const none = parseListenRequest(listenBody('d', { resourceSubscriptions: [] }), listenHeaders(), options);
    expect('resourceSubscriptions' in none.filter).toBe(false);
  });
});

describe('parseListenRequest: the 1000-entry limit', () => {
  const uris = (n: number) => Array.from({ length: n }, (_, i) => `note://user/${i}`);

  test('exactly 1000 URIs are accepted', () => {
    const parsed = parseListenRequest(listenBody('l', { resourceSubscriptions: uris(1000) }), listenHeaders(), options);
    expect(parsed.filter.resourceSubscriptions?.length).toBe(1000);
  });

  test('1001 URIs are -32602 naming the field and the limit', () => {
    const error = refuse(listenBody('l', { resourceSubscriptions: uris(1001) }));
    expect(error.rpcCode).toBe(-32602);
    expect(refusalStatus(error)).toBe(400);
    expect(error.id).toBe('l');
    expect(error.message).toMatch(/resourceSubscriptions/);
    expect(error.message).toMatch(/1000/);
  });

  test('a 50,000-URI request is refused by its size, before any entry is looked at', () => {
    // Entries are deliberately invalid: were they walked, the error would name an index instead.
    const huge = Array.from({ length: 50_000 }, () => 42);
    const error = refuse(listenBody('big', { resourceSubscriptions: huge }));
    expect(error.rpcCode).toBe(-32602);
    expect(error.message).toMatch(/at most 1000/);
    expect(error.message).not.toMatch(/\[\d+\]/);
  });

  test('the same limit applies to taskIds: 1000 pass, 1001 do not', () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `task-${i}`);
    const ok = parseListenRequest(
      listenBody('t', { taskIds: ids(1000) }, taskCapabilities()),
      listenHeaders(),
      withTasks,
    );
    expect(ok.filter.taskIds?.length).toBe(1000);
    const error = refuse(listenBody('t', { taskIds: ids(1001) }, taskCapabilities()), listenHeaders(), withTasks);
    expect(error.rpcCode).toBe(-32602);
    expect(error.message).toMatch(/taskIds/);
    expect(error.message).toMatch(/1000/);
  });

  test('the limit is configurable', () => {
    const error = refuse(listenBody('l', { resourceSubscriptions: uris(6) }), listenHeaders(), {
      ...options,
      maxFilterEntries: 5,
    });
    expect(error.message).toMatch(/at most 5/);
  });
});

describe('parseListenRequest: validation order (spec §6)', () => {
  test('-32600 (not a request) comes before header checks', () => {
    expect(refuse([listenBody(1, {})], {}).rpcCode).toBe(-32600);
    expect(refuse({ ...listenBody(1, {}), jsonrpc: '1.0' }, {}).rpcCode).toBe(-32600);
  });

  test('-32602 for _meta comes before -32020 for headers', () => {
    const body = listenBody(1, {}) as any;
    delete body.params._meta;
    expect(refuse(body, {}).rpcCode).toBe(-32602);
  });

  test('-32020 for headers comes before -32022 for the version', () => {
    const body = listenBody(1, {}, { 'io.modelcontextprotocol/protocolVersion': '1999-01-01' });
    expect(refuse(body, listenHeaders()).rpcCode).toBe(-32020);
  });

  test('-32022 comes before -32601, -32021 and the filter checks', () => {
    const body = {
      ...listenBody(
        1,
        { taskIds: ['t'], toolsListChanged: 'yes' },
        { 'io.modelcontextprotocol/protocolVersion': '1999-01-01' },
      ),
      method: 'other/method',
    };
    const headers = listenHeaders({ 'mcp-protocol-version': '1999-01-01', 'mcp-method': 'other/method' });
    expect(refuse(body, headers, withTasks).rpcCode).toBe(-32022);
  });

  test('-32601 comes before -32021', () => {
    const body = { ...listenBody(1, { taskIds: ['t'] }), method: 'other/method' };
    expect(refuse(body, listenHeaders({ 'mcp-method': 'other/method' }), withTasks).rpcCode).toBe(-32601);
  });

  test('-32021 comes before the filter checks', () => {
    const error = refuse(listenBody(1, { taskIds: [5], toolsListChanged: 'yes' }), listenHeaders(), withTasks);
    expect(error.rpcCode).toBe(-32021);
  });
});

describe('isAbsoluteUri', () => {
  test('accepts URIs with a scheme', () => {
    for (const uri of [
      'note://alice/todo',
      'urn:isbn:0451450523',
      'file:///tmp/x.txt',
      'https://example.com/a/b?c=d#e',
      'mailto:a@example.com',
      'x-custom+v1.2:thing',
    ]) {
      expect([uri, isAbsoluteUri(uri)]).toStrictEqual([uri, true]); // the URI shows in a failure
    }
  });

  test('refuses relative references, bad schemes, whitespace and control characters', () => {
    for (const uri of [
      '',
      'todo.txt',
      '/abs/path',
      '//host/path',
      ':nothing',
      '1note://x',
      'no te://x',
      'note://a b',
      'note://a\nb',
      'note://a\tb',
      'note://a\u0000',
      'note://a"b',
    ]) {
      expect([uri, isAbsoluteUri(uri)]).toStrictEqual([uri, false]); // the URI shows in a failure
    }
  });

  test('every character after the scheme is judged alike by the ASCII fast path and the full rule', () => {
    // The full rule, written out: no whitespace (Unicode's included), no control character, none of "<>\^`{|}.
    const refused = (code: number) =>
      /\s/.test(String.fromCharCode(code)) ||
      code <= 0x1f ||
      code === 0x7f ||
      '"<>\\^`{|}'.includes(String.fromCharCode(code));
    const wrong: string[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue; // lone surrogates: not text
      const uri = `note://a${String.fromCharCode(code)}b`;
      if (isAbsoluteUri(uri) === refused(code)) wrong.push(code.toString(16));
    }
    expect(wrong).toStrictEqual([]);
  });
});
