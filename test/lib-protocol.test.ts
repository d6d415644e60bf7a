/**
 * Request validation (spec §6): each check's JSON-RPC code, HTTP status, echoed id and message, and the
 * order the checks run in. Expected values come from the spec's table, not from the implementation.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ErrorCode,
  hasErrorCode,
  httpStatusFor,
  isAbsoluteUri,
  parseJsonBody,
  parseListenRequest,
  type HeaderBag,
  type ParseOptions,
  type ProtocolError,
} from 'mcp-subscriptions';
import { listenBody, listenHeaders } from './helpers/sse.ts';

const TASKS = 'io.modelcontextprotocol/tasks';
const options: ParseOptions = { protocolVersions: ['2026-07-28'], maxFilterEntries: 1000, tasksEnabled: false };
const withTasks: ParseOptions = { ...options, tasksEnabled: true };

/** Runs `fn`, asserts it refused the request with a ProtocolError, and returns the error. */
function refusal(fn: () => unknown): ProtocolError {
  try {
    fn();
  } catch (error) {
    assert.ok(hasErrorCode(error, ErrorCode.Protocol), `expected a protocol error, got ${String(error)}`);
    return error as ProtocolError;
  }
  assert.fail('expected the request to be refused');
}

function refuse(body: unknown, headers: HeaderBag = listenHeaders(), opts: ParseOptions = options): ProtocolError {
  return refusal(() => parseListenRequest(body, headers, opts));
}

function taskCapabilities() {
  return { 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } };
}

describe('spec §6 HTTP statuses', () => {
  test('every pre-stream error code maps to the status the spec table gives', () => {
    assert.equal(httpStatusFor(-32700), 400);
    assert.equal(httpStatusFor(-32600), 400);
    assert.equal(httpStatusFor(-32602), 400);
    assert.equal(httpStatusFor(-32020), 400);
    assert.equal(httpStatusFor(-32022), 400);
    assert.equal(httpStatusFor(-32601), 404);
    assert.equal(httpStatusFor(-32021), 400);
    assert.equal(httpStatusFor(-32603), 503);
  });
});

describe('parseJsonBody', () => {
  test('a body that is not JSON is -32700 with a null id', () => {
    for (const text of ['{', '', 'listen please', '{"jsonrpc":"2.0",}']) {
      const error = refusal(() => parseJsonBody(text));
      assert.equal(error.rpcCode, -32700);
      assert.equal(error.httpStatus, 400);
      assert.equal(error.id, null);
    }
  });

  test('JSON text of any shape parses (shape is the next check)', () => {
    assert.deepEqual(parseJsonBody('[1,2]'), [1, 2]);
    assert.equal(parseJsonBody('null'), null);
  });
});

describe('parseListenRequest: one check at a time', () => {
  test('a well-formed request yields its id, version and requested filter', () => {
    const parsed = parseListenRequest(
      listenBody('listen-1', { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] }),
      listenHeaders(),
      options,
    );
    assert.deepEqual(parsed, {
      id: 'listen-1',
      protocolVersion: '2026-07-28',
      filter: { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] },
    });
  });

  test('0 and "" are valid ids, kept verbatim', () => {
    assert.equal(parseListenRequest(listenBody(0, {}), listenHeaders(), options).id, 0);
    assert.equal(parseListenRequest(listenBody('', {}), listenHeaders(), options).id, '');
    assert.equal(parseListenRequest(listenBody(-7.5, {}), listenHeaders(), options).id, -7.5);
  });

  test('clientInfo is optional and an empty clientCapabilities declares none', () => {
    const body = listenBody(1, { toolsListChanged: true });
    assert.equal('io.modelcontextprotocol/clientInfo' in body.params._meta, false);
    assert.deepEqual(parseListenRequest(body, listenHeaders(), options).filter, { toolsListChanged: true });
    const withInfo = listenBody(2, {}, { 'io.modelcontextprotocol/clientInfo': { name: 'c', version: '1' } });
    assert.equal(parseListenRequest(withInfo, listenHeaders(), options).id, 2);
  });

  test('anything but a single request object is -32600 with a null id', () => {
    for (const body of [null, 42, 'subscriptions/listen', true]) {
      const error = refuse(body);
      assert.equal(error.rpcCode, -32600);
      assert.equal(error.httpStatus, 400);
      assert.equal(error.id, null);
    }
    const batch = refuse([listenBody(1, {})]);
    assert.equal(batch.rpcCode, -32600);
    assert.match(batch.message, /batch/i);
  });

  test('a wrong or missing jsonrpc version is -32600 and echoes the id', () => {
    for (const jsonrpc of [undefined, '1.0', 2]) {
      const error = refuse({ ...listenBody('a', {}), jsonrpc });
      assert.equal(error.rpcCode, -32600);
      assert.equal(error.id, 'a');
      assert.match(error.message, /jsonrpc/);
    }
  });

  test('a missing or non-scalar id is -32600: listen is a request, not a notification', () => {
    for (const id of [undefined, null, {}, [1], true]) {
      const error = refuse({ ...listenBody('x', {}), id });
      assert.equal(error.rpcCode, -32600);
      assert.equal(error.id, null);
      assert.match(error.message, /`id`/);
    }
  });

  test('a method that is not a string, or params that are not an object, is -32600', () => {
    const method = refuse({ ...listenBody(3, {}), method: 7 });
    assert.equal(method.rpcCode, -32600);
    assert.match(method.message, /`method`/);
    for (const params of [[], 'p', 5]) {
      const error = refuse({ ...listenBody(3, {}), params });
      assert.equal(error.rpcCode, -32600);
      assert.equal(error.id, 3);
      assert.match(error.message, /`params`/);
    }
  });

  test('missing _meta, protocol version or client capabilities is -32602 naming what is missing', () => {
    const noParams = refuse({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen' });
    assert.equal(noParams.rpcCode, -32602);
    assert.match(noParams.message, /_meta/);

    const noMeta = listenBody(1, {}) as any;
    delete noMeta.params._meta;
    assert.match(refuse(noMeta).message, /_meta/);

    const noVersion = listenBody(1, {}) as any;
    delete noVersion.params._meta['io.modelcontextprotocol/protocolVersion'];
    const versionError = refuse(noVersion);
    assert.equal(versionError.rpcCode, -32602);
    assert.equal(versionError.httpStatus, 400);
    assert.match(versionError.message, /protocolVersion/);

    const noCaps = listenBody(1, {}) as any;
    delete noCaps.params._meta['io.modelcontextprotocol/clientCapabilities'];
    const capsError = refuse(noCaps);
    assert.equal(capsError.rpcCode, -32602);
    assert.match(capsError.message, /clientCapabilities/);

    const nullCaps = refuse(listenBody(1, {}, { 'io.modelcontextprotocol/clientCapabilities': null }));
    assert.equal(nullCaps.rpcCode, -32602);
  });

  test('MCP-Protocol-Version missing or different from the body is -32020', () => {
    const headers = listenHeaders();
    const { 'mcp-protocol-version': _omit, ...noVersion } = headers;
    const missing = refuse(listenBody('m', {}), noVersion);
    assert.equal(missing.rpcCode, -32020);
    assert.equal(missing.httpStatus, 400);
    assert.equal(missing.id, 'm');
    assert.match(missing.message, /MCP-Protocol-Version/);

    const different = refuse(listenBody('m', {}), listenHeaders({ 'mcp-protocol-version': '2025-11-25' }));
    assert.equal(different.rpcCode, -32020);
    assert.match(different.message, /MCP-Protocol-Version/);
  });

  test('Mcp-Method missing or different from the body is -32020', () => {
    const { 'mcp-method': _omit, ...noMethod } = listenHeaders();
    const missing = refuse(listenBody('m', {}), noMethod);
    assert.equal(missing.rpcCode, -32020);
    assert.match(missing.message, /Mcp-Method/);

    const different = refuse(listenBody('m', {}), listenHeaders({ 'mcp-method': 'tools/list' }));
    assert.equal(different.rpcCode, -32020);
    assert.match(different.message, /Mcp-Method/);
  });

  test('an unsupported protocol version is -32022 with the supported and requested versions in data', () => {
    const body = listenBody('v', {}, { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' });
    const error = refuse(body, listenHeaders({ 'mcp-protocol-version': '2025-11-25' }));
    assert.equal(error.rpcCode, -32022);
    assert.equal(error.httpStatus, 400);
    assert.equal(error.id, 'v');
    assert.deepEqual(error.data, { supported: ['2026-07-28'], requested: '2025-11-25' });
  });

  test('a method other than listen reaching the engine is -32601 with HTTP 404', () => {
    const body = { ...listenBody('q', {}), method: 'subscriptions/subscribe' };
    const error = refuse(body, listenHeaders({ 'mcp-method': 'subscriptions/subscribe' }));
    assert.equal(error.rpcCode, -32601);
    assert.equal(error.httpStatus, 404);
    assert.equal(error.id, 'q');
  });

  test('taskIds without the Tasks extension declared is -32021 with the required capability in data', () => {
    const error = refuse(listenBody('t', { taskIds: ['task-1'] }), listenHeaders(), withTasks);
    assert.equal(error.rpcCode, -32021);
    assert.equal(error.httpStatus, 400);
    assert.equal(error.id, 't');
    assert.deepEqual(error.data, { requiredCapabilities: { extensions: { [TASKS]: {} } } });
    // Declared on this very request: accepted.
    const parsed = parseListenRequest(
      listenBody('t', { taskIds: ['task-1'] }, taskCapabilities()),
      listenHeaders(),
      withTasks,
    );
    assert.deepEqual(parsed.filter, { taskIds: ['task-1'] });
  });

  test('taskIds on a server without the Tasks extension is an unknown field: ignored, not an error', () => {
    const parsed = parseListenRequest(
      listenBody('t', { taskIds: ['task-1'], toolsListChanged: true }),
      listenHeaders(),
      options,
    );
    assert.deepEqual(parsed.filter, { toolsListChanged: true });
  });

  test('notifications missing or not an object is -32602 naming it', () => {
    for (const notifications of [undefined, null, [], 'all', true]) {
      const error = refuse(listenBody('n', notifications as any));
      assert.equal(error.rpcCode, -32602);
      assert.equal(error.httpStatus, 400);
      assert.equal(error.id, 'n');
      assert.match(error.message, /notifications/);
    }
  });

  test('a list flag that is not a boolean is -32602 naming the flag', () => {
    for (const flag of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) {
      for (const value of ['true', 1, null, {}]) {
        const error = refuse(listenBody('f', { [flag]: value }));
        assert.equal(error.rpcCode, -32602);
        assert.ok(error.message.includes(flag), `${error.message} should name ${flag}`);
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
    assert.deepEqual(parsed.filter, { promptsListChanged: true });
  });

  test('resourceSubscriptions must be an array of absolute URI strings; the error names the field and index', () => {
    const notArray = refuse(listenBody('r', { resourceSubscriptions: 'note://a' }));
    assert.equal(notArray.rpcCode, -32602);
    assert.match(notArray.message, /resourceSubscriptions/);

    const notString = refuse(listenBody('r', { resourceSubscriptions: ['note://a', 7] }));
    assert.equal(notString.rpcCode, -32602);
    assert.match(notString.message, /resourceSubscriptions\[1\]/);

    const relative = refuse(listenBody('r', { resourceSubscriptions: ['note://a', 'note://b', 'todo.txt'] }));
    assert.equal(relative.rpcCode, -32602);
    assert.match(relative.message, /resourceSubscriptions\[2\]/);
    assert.match(relative.message, /absolute URI/);
    // The message names the position, never echoes the rejected value back.
    assert.equal(relative.message.includes('todo.txt'), false);
  });

  test('taskIds must be an array of non-empty strings', () => {
    const body = (taskIds: unknown) => listenBody('t', { taskIds }, taskCapabilities());
    assert.match(refuse(body('task-1'), listenHeaders(), withTasks).message, /taskIds/);
    assert.match(refuse(body(['ok', 3]), listenHeaders(), withTasks).message, /taskIds\[1\]/);
    const empty = refuse(body(['']), listenHeaders(), withTasks);
    assert.equal(empty.rpcCode, -32602);
    assert.match(empty.message, /taskIds\[0\]/);
  });

  test('duplicates collapse in request order and an empty list is omitted', () => {
    const parsed = parseListenRequest(
      listenBody('d', { resourceSubscriptions: ['note://b', 'note://a', 'note://b', 'note://a', 'note://c'] }),
      listenHeaders(),
      options,
    );
    assert.deepEqual(parsed.filter.resourceSubscriptions, ['note://b', 'note://a', 'note://c']);
    const none = parseListenRequest(listenBody('d', { resourceSubscriptions: [] }), listenHeaders(), options);
    assert.equal('resourceSubscriptions' in none.filter, false);
  });
});

describe('parseListenRequest: the 1000-entry limit', () => {
  const uris = (n: number) => Array.from({ length: n }, (_, i) => `note://user/${i}`);

  test('exactly 1000 URIs are accepted', () => {
    const parsed = parseListenRequest(listenBody('l', { resourceSubscriptions: uris(1000) }), listenHeaders(), options);
    assert.equal(parsed.filter.resourceSubscriptions?.length, 1000);
  });

  test('1001 URIs are -32602 naming the field and the limit', () => {
    const error = refuse(listenBody('l', { resourceSubscriptions: uris(1001) }));
    assert.equal(error.rpcCode, -32602);
    assert.equal(error.httpStatus, 400);
    assert.equal(error.id, 'l');
    assert.match(error.message, /resourceSubscriptions/);
    assert.match(error.message, /1000/);
  });

  test('a 50,000-URI request is refused by its size, before any entry is looked at', () => {
    // Entries are deliberately invalid: were they walked, the error would name an index instead.
    const huge = Array.from({ length: 50_000 }, () => 42);
    const error = refuse(listenBody('big', { resourceSubscriptions: huge }));
    assert.equal(error.rpcCode, -32602);
    assert.match(error.message, /at most 1000/);
    assert.doesNotMatch(error.message, /\[\d+\]/);
  });

  test('the same limit applies to taskIds: 1000 pass, 1001 do not', () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `task-${i}`);
    const ok = parseListenRequest(
      listenBody('t', { taskIds: ids(1000) }, taskCapabilities()),
      listenHeaders(),
      withTasks,
    );
    assert.equal(ok.filter.taskIds?.length, 1000);
    const error = refuse(listenBody('t', { taskIds: ids(1001) }, taskCapabilities()), listenHeaders(), withTasks);
    assert.equal(error.rpcCode, -32602);
    assert.match(error.message, /taskIds/);
    assert.match(error.message, /1000/);
  });

  test('the limit is configurable', () => {
    const error = refuse(listenBody('l', { resourceSubscriptions: uris(6) }), listenHeaders(), {
      ...options,
      maxFilterEntries: 5,
    });
    assert.match(error.message, /at most 5/);
  });
});

describe('parseListenRequest: validation order (spec §6)', () => {
  test('-32600 (not a request) comes before header checks', () => {
    assert.equal(refuse([listenBody(1, {})], {}).rpcCode, -32600);
    assert.equal(refuse({ ...listenBody(1, {}), jsonrpc: '1.0' }, {}).rpcCode, -32600);
  });

  test('-32602 for _meta comes before -32020 for headers', () => {
    const body = listenBody(1, {}) as any;
    delete body.params._meta;
    assert.equal(refuse(body, {}).rpcCode, -32602);
  });

  test('-32020 for headers comes before -32022 for the version', () => {
    const body = listenBody(1, {}, { 'io.modelcontextprotocol/protocolVersion': '1999-01-01' });
    assert.equal(refuse(body, listenHeaders()).rpcCode, -32020);
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
    assert.equal(refuse(body, headers, withTasks).rpcCode, -32022);
  });

  test('-32601 comes before -32021', () => {
    const body = { ...listenBody(1, { taskIds: ['t'] }), method: 'other/method' };
    assert.equal(refuse(body, listenHeaders({ 'mcp-method': 'other/method' }), withTasks).rpcCode, -32601);
  });

  test('-32021 comes before the filter checks', () => {
    const error = refuse(listenBody(1, { taskIds: [5], toolsListChanged: 'yes' }), listenHeaders(), withTasks);
    assert.equal(error.rpcCode, -32021);
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
      assert.equal(isAbsoluteUri(uri), true, uri);
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
      assert.equal(isAbsoluteUri(uri), false, JSON.stringify(uri));
    }
  });
});
