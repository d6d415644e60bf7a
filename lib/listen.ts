/**
 * One listen request, end to end: parse, reserve a slot, authorize every URI and task id, open the
 * stream, acknowledge, register with the hub. Adapters call {@link createListenHandler} once and hand
 * each request's body, headers, principal and raw response to it; lib/http.ts is its HTTP face.
 */
import { authorizeEach, CheckSemaphore, type ItemCheck, type StageCounts } from './authorize.ts';
import { defineCapabilities } from './capabilities.ts';
import { checkErrorChannel } from './diagnostics.ts';
import {
  AuthorizeDeadlineError,
  describeValue,
  hasErrorCode,
  ErrorCode,
  OptionsError,
  ProtocolError,
} from './errors.ts';
import type { RefusalReason } from './errors.ts';
import { SUPPORTED_PROTOCOL_VERSIONS } from './events.ts';
import { negotiate, writeProtocolError, type ListenHandler, type ListenInput } from './http.ts';
import type { StreamResponse } from './listen-stream.ts';
import { isAnonymous } from './principal.ts';
import {
  ackFrame,
  cancelledRequestId,
  echoableId,
  parseJsonBody,
  parseListenRequest,
  resultFrame,
  type ListenRequest,
} from './protocol.ts';
import { HUB_OPTION_KEYS, hubEngine, isHub, REMOVED_HUB_OPTIONS } from './subscription-hub.ts';
import { recordAck, recordAuthorization, recording as telemetryRecording, type CheckName } from './telemetry.ts';
import type {
  CheckErrorMessage,
  ListenHandlerOptions,
  NotificationFilter,
  RequestId,
  ResolvedListenOptions,
} from './types.ts';
import {
  durationOrFalse,
  given,
  knownKeys,
  loggerOption,
  optionalFunction,
  optionKeys,
  optionsObject,
  positiveInteger,
  removedOptions,
} from './validate.ts';

/** Every key of {@link ListenHandlerOptions}, checked against the interface by the compiler. */
export const LISTEN_OPTION_KEYS = optionKeys<ListenHandlerOptions>({
  hub: true,
  capabilities: true,
  canRead: true,
  handleSubscribeResource: true,
  canAccessTask: true,
  keepAliveMs: true,
  maxFilterEntries: true,
  authorizeConcurrency: true,
  authorizeTimeoutMs: true,
  authorizeDeadlineMs: true,
  maxChecksInFlight: true,
  protocolVersions: true,
  serverInfo: true,
  logger: true,
});

/** The hub's own options, which a listen entry point is sometimes handed by mistake. */
const HUB_OPTION_HINT = 'it is an option of `new SubscriptionHub()`; pass it there and hand the hub over as `hub`';

/** Which entry point is validating, so that its keys and its name appear in unknown-key errors. */
export interface ListenOptionsScope {
  /** The entry point as users write it, e.g. `mcpSubscriptions()`. */
  readonly where: string;
  /** Keys the entry point takes besides the listen options (e.g. `principal`, `maxBodyBytes`). */
  readonly extraKeys?: readonly string[];
  /** Keys that belong elsewhere, each with a hint saying where. */
  readonly elsewhere?: Readonly<Record<string, string>>;
  /**
   * Options the entry point supplies itself before the engine is built (the Nest module builds the
   * hub at start-up and runs the app's guards as the default `canRead`): their absence is no mistake
   * when the options are checked ahead of time with {@link checkListenOptions}.
   */
  readonly suppliedLater?: readonly ('hub' | 'canRead' | 'canAccessTask')[];
}

/** The hub's options (but the logger, which both take), for the hint when one is given to listen. */
const HUB_ONLY_KEYS = HUB_OPTION_KEYS.filter((key) => !LISTEN_OPTION_KEYS.includes(key));

/** Listen options checked ahead of the hub: everything {@link resolveListenOptions} resolves but those two. */
export type CheckedListenOptions<Req = unknown> = Omit<ResolvedListenOptions<Req>, 'hub' | 'logger'>;

/**
 * Validates listen options and applies their defaults, all but the hub's and the logger's (which
 * defaults to the hub's); never mutates its input. Unknown keys are refused, with the nearest known
 * one suggested. What `scope.suppliedLater` names may be absent.
 */
export function checkListenOptions<Req>(
  options: Partial<ListenHandlerOptions<Req>>,
  scope: ListenOptionsScope = { where: 'createListenHandler()' },
): CheckedListenOptions<Req> {
  optionsObject(options);
  const elsewhere: Record<string, string> = {};
  for (const key of HUB_ONLY_KEYS) elsewhere[key] = HUB_OPTION_HINT;
  removedOptions(options, REMOVED_HUB_OPTIONS, scope.where);
  knownKeys(options, [...LISTEN_OPTION_KEYS, ...(scope.extraKeys ?? [])], scope.where, {
    ...elsewhere,
    ...scope.elsewhere,
  });
  const later = scope.suppliedLater ?? [];
  const hub = options.hub;
  if (!(hub === undefined && later.includes('hub')) && !isHub(hub)) {
    // A hub is known by its brand: an object with a hub's methods (a wrapper, a mock) is not one.
    throw new OptionsError(
      hub === undefined ? ErrorCode.MissingOption : ErrorCode.InvalidHub,
      `Expected \`hub\` of ${scope.where} to be the hub your services publish to, made with \`new SubscriptionHub()\` ` +
        `imported from 'mcp-subscriptions' (not an object shaped like one), got ${describeValue(hub)}`,
    );
  }
  if (options.capabilities === undefined) {
    throw new OptionsError(
      ErrorCode.MissingOption,
      'Expected `capabilities` to declare what the server offers, e.g. `{ toolsListChanged: true, resourceSubscriptions: true }`',
    );
  }
  const capabilities = defineCapabilities(options.capabilities);
  optionalFunction('canRead', options.canRead);
  optionalFunction('handleSubscribeResource', options.handleSubscribeResource);
  optionalFunction('canAccessTask', options.canAccessTask);
  if (capabilities.resourceSubscriptions && options.canRead === undefined && !later.includes('canRead')) {
    throw new OptionsError(
      ErrorCode.MissingOption,
      'Expected `canRead` (the read check your resources/read uses) since `capabilities.resourceSubscriptions` is on',
    );
  }
  if (capabilities.tasks && options.canAccessTask === undefined && !later.includes('canAccessTask')) {
    throw new OptionsError(
      ErrorCode.MissingOption,
      'Expected `canAccessTask` (does the caller own this task?) since `capabilities.tasks` is on',
    );
  }
  const protocolVersions = given(options.protocolVersions, SUPPORTED_PROTOCOL_VERSIONS);
  if (
    !Array.isArray(protocolVersions) ||
    protocolVersions.length === 0 ||
    protocolVersions.some((v) => typeof v !== 'string')
  ) {
    throw new OptionsError(
      ErrorCode.InvalidProtocolVersions,
      `Expected \`protocolVersions\` to be a non-empty array of strings, got ${describeValue(protocolVersions)}`,
    );
  }
  if (options.serverInfo !== undefined && (typeof options.serverInfo !== 'object' || options.serverInfo === null)) {
    throw new OptionsError(
      ErrorCode.InvalidServerInfo,
      `Expected \`serverInfo\` to be an object like \`{ name, version }\`, got ${describeValue(options.serverInfo)}`,
    );
  }
  if (options.logger !== undefined) loggerOption('logger', options.logger);
  return {
    capabilities,
    canRead: options.canRead,
    handleSubscribeResource: options.handleSubscribeResource,
    canAccessTask: options.canAccessTask,
    keepAliveMs: durationOrFalse('keepAliveMs', given(options.keepAliveMs, 15_000)),
    maxFilterEntries: positiveInteger('maxFilterEntries', given(options.maxFilterEntries, 1000)),
    authorizeConcurrency: positiveInteger('authorizeConcurrency', given(options.authorizeConcurrency, 16)),
    authorizeTimeoutMs: durationOrFalse('authorizeTimeoutMs', given(options.authorizeTimeoutMs, 5000)),
    authorizeDeadlineMs: durationOrFalse('authorizeDeadlineMs', given(options.authorizeDeadlineMs, 10_000)),
    maxChecksInFlight: positiveInteger('maxChecksInFlight', given(options.maxChecksInFlight, 256)),
    protocolVersions: Object.freeze([...(protocolVersions as readonly string[])]),
    serverInfo: options.serverInfo,
  };
}

/**
 * Applies defaults to listen options and validates them ({@link checkListenOptions}, the hub
 * included); never mutates its input.
 */
export function resolveListenOptions<Req>(
  options: ListenHandlerOptions<Req>,
  scope: ListenOptionsScope = { where: 'createListenHandler()' },
): ResolvedListenOptions<Req> {
  const checked = checkListenOptions(options, { ...scope, suppliedLater: [] });
  const { hub } = options;
  return Object.freeze({
    ...checked,
    hub,
    logger: options.logger === undefined ? hub.options.logger : options.logger,
  });
}

/** The warning of a listen without a principal whose URIs the read check all refused, and its likely causes. */
const ANONYMOUS_WITH_READ_CHECK =
  'a subscriptions/listen request had no principal, and the read check (`canRead`) refused every URI it asked for: ' +
  "they were checked as an anonymous caller's, and the acknowledgement holds none. " +
  'If your callers authenticate, the likely cause is auth that runs after the listen middleware: in Express mount ' +
  'your auth before mcpSubscriptions(), on the same route; in Fastify authenticate in a hook of your MCP route ' +
  "(or of the app), not in its handler; in Nest authenticate in a global guard or in the module's `guards`. Or your auth keeps the caller elsewhere than `req.auth.extra.sub` or `req.user`: give the " +
  '`principal` option. Logged once (docs/mount-order.md)';

function noOutcomes(): StageCounts {
  return [0, 0, 0, 0];
}

/**
 * Creates the listen engine an adapter serves requests with. Options are validated here; a mistake
 * throws an `OptionsError` naming the field.
 */
export function createListenHandler<Req = unknown>(
  options: ListenHandlerOptions<Req>,
  scope?: ListenOptionsScope,
): ListenHandler<Req> {
  const resolved = resolveListenOptions(options, scope);
  const { hub, capabilities, logger } = resolved;
  const engine = hubEngine(hub);
  const parseOptions = {
    protocolVersions: resolved.protocolVersions,
    maxFilterEntries: resolved.maxFilterEntries,
    tasksEnabled: capabilities.tasks,
  };
  // One bound for every listen this engine serves: a burst of listens cannot flood the host's database.
  const semaphore = new CheckSemaphore(resolved.maxChecksInFlight);
  /** The terminal result of a graceful end, built when a stream ends rather than kept by each open one. */
  const result = (idJson: string): string => resultFrame(idJson, resolved.serverInfo);
  const uriChecks: ItemCheck<Req>[] = [];
  if (resolved.canRead) uriChecks.push(resolved.canRead);
  if (resolved.handleSubscribeResource) uriChecks.push(resolved.handleSubscribeResource);
  const taskChecks: ItemCheck<Req>[] = resolved.canAccessTask ? [resolved.canAccessTask] : [];
  const stageNames = ['canRead', 'handleSubscribeResource'];
  /** The telemetry name of each URI check stage, in the order the checks run. */
  const uriCheckNames: CheckName[] = [];
  if (resolved.canRead) uriCheckNames.push('can_read');
  if (resolved.handleSubscribeResource) uriCheckNames.push('handle_subscribe_resource');
  // A listen without a principal whose every URI the read check refused: most likely auth that runs
  // after us. Said once per engine (one per middleware or module): anonymous callers may be intended.
  const readChecked = capabilities.resourceSubscriptions && resolved.canRead !== undefined;
  let warnedAnonymous = false;

  const onCheckError =
    (what: 'resource' | 'task') =>
    (error: unknown, stage: number): void => {
      const hook = what === 'task' ? 'canAccessTask' : (stageNames[stage] ?? 'check');
      // Neither the item nor the error itself is logged: URIs and task ids can be confidential, and the
      // host's error (its message, its stack) may quote them. The log and telemetry get its name and code.
      const { name, code } = (typeof error === 'object' && error !== null ? error : {}) as {
        name?: unknown;
        code?: unknown;
      };
      logger.warn(`${hook} failed; the ${what} was left out of the acknowledgement`, {
        errorName: name,
        errorCode: code,
      });
      if (checkErrorChannel.hasSubscribers) {
        checkErrorChannel.publish({ stage: hook, errorName: name, errorCode: code } satisfies CheckErrorMessage);
      }
    };
  const onResourceError = onCheckError('resource');
  const onTaskError = onCheckError('task');

  /**
   * The honoured filter: the flags this server offers, and the URIs and task ids that pass their
   * checks. Synchronous when every check answered synchronously; a promise otherwise.
   */
  function narrow(
    requested: NotificationFilter,
    context: { readonly principal: string; readonly request: Req },
    signal: () => AbortSignal,
  ): NotificationFilter | Promise<NotificationFilter> {
    const honored: { -readonly [K in keyof NotificationFilter]: NotificationFilter[K] } = {};
    if (requested.toolsListChanged && capabilities.toolsListChanged) honored.toolsListChanged = true;
    if (requested.promptsListChanged && capabilities.promptsListChanged) honored.promptsListChanged = true;
    if (requested.resourcesListChanged && capabilities.resourcesListChanged) honored.resourcesListChanged = true;
    const run = {
      concurrency: resolved.authorizeConcurrency,
      timeoutMs: resolved.authorizeTimeoutMs,
      signal,
      semaphore,
    };
    const checkUris = requested.resourceSubscriptions !== undefined && capabilities.resourceSubscriptions;
    const checkTasks = requested.taskIds !== undefined && capabilities.tasks;
    // Outcomes are counted only while telemetry records, and only for a listen that has items to check.
    const measured = (checkUris || checkTasks) && telemetryRecording();
    const started = measured ? performance.now() : 0;
    const uriOutcomes = measured && checkUris ? uriCheckNames.map(noOutcomes) : undefined;
    const taskOutcomes = measured && checkTasks && taskChecks.length > 0 ? [noOutcomes()] : undefined;
    const authorize = (
      items: readonly string[],
      checks: readonly ItemCheck<Req>[],
      onError: (error: unknown, stage: number) => void,
      outcomes: StageCounts[] | undefined,
    ): string[] | Promise<string[]> =>
      authorizeEach(items, checks, context, { ...run, onError, ...(outcomes !== undefined ? { outcomes } : {}) });
    const uris = checkUris
      ? authorize(requested.resourceSubscriptions, uriChecks, onResourceError, uriOutcomes)
      : undefined;
    const taskIds = checkTasks ? authorize(requested.taskIds, taskChecks, onTaskError, taskOutcomes) : undefined;
    const done = (kept: { uris: string[] | undefined; taskIds: string[] | undefined }): NotificationFilter => {
      if (kept.uris !== undefined && kept.uris.length > 0) honored.resourceSubscriptions = kept.uris;
      if (kept.taskIds !== undefined && kept.taskIds.length > 0) honored.taskIds = kept.taskIds;
      if (measured) {
        const outcomes = new Map<CheckName, StageCounts>();
        uriOutcomes?.forEach((counts, stage) => outcomes.set(uriCheckNames[stage] as CheckName, counts));
        if (taskOutcomes !== undefined) outcomes.set('can_access_task', taskOutcomes[0] as StageCounts);
        recordAuthorization(performance.now() - started, outcomes);
      }
      return honored;
    };
    if (!(uris instanceof Promise) && !(taskIds instanceof Promise)) return done({ uris, taskIds });
    return Promise.all([uris, taskIds]).then(([u, t]) => done({ uris: u, taskIds: t }));
  }

  async function handle(input: ListenInput<Req>, res: StreamResponse): Promise<void> {
    const received = telemetryRecording() ? performance.now() : undefined;
    let request: ListenRequest;
    let id: RequestId | null = null;
    try {
      // HTTP-level checks come first: a body that is not JSON by its Content-Type is not parsed.
      negotiate(input.headers, input.body);
      // The body is read into locals only: an open stream must not pin a large request in memory.
      const body =
        input.body !== undefined || input.rawBody === undefined ? input.body : parseJsonBody(String(input.rawBody));
      id = echoableId(body);
      request = parseListenRequest(body, input.headers, parseOptions);
    } catch (error) {
      if (hasErrorCode(error, ErrorCode.Protocol)) refuse(res, error as ProtocolError);
      else fail(res, error, id);
      return;
    }

    const { principal } = input;
    let reservation;
    try {
      reservation = engine.reserve(principal, request.id);
    } catch (error) {
      if (hasErrorCode(error, ErrorCode.Protocol)) refuse(res, error as ProtocolError);
      else fail(res, error, request.id);
      return;
    }

    // The checks end when the client leaves or cancels the listen (stop checking and give the slot
    // back) or when the deadline passes (open with what passed): either way the checks in flight are
    // told so. All of it is set up only if a check answers with a promise: synchronous checks finish
    // before any I/O, so nothing can leave or cancel meanwhile.
    let stop: AbortController | undefined;
    const signal = (): AbortSignal => (stop ??= new AbortController()).signal;
    const { authorizeDeadlineMs } = resolved;
    let honored: NotificationFilter;
    let gone = false;
    try {
      const narrowed = narrow(request.filter, { principal, request: input.request }, signal);
      if (!(narrowed instanceof Promise)) {
        honored = narrowed;
      } else {
        const onGone = (): void => {
          gone = true;
          (stop ??= new AbortController()).abort();
        };
        res.once('close', onGone);
        reservation.cancellable(cancelled(res, onGone));
        const deadline =
          authorizeDeadlineMs === false
            ? undefined
            : // From the first check that answered with a promise: the synchronous ones before it ran
              // without yielding, so no deadline could have cut them short anyway.
              setTimeout(
                () => (stop ??= new AbortController()).abort(new AuthorizeDeadlineError(authorizeDeadlineMs)),
                authorizeDeadlineMs,
              );
        try {
          honored = await narrowed;
        } finally {
          clearTimeout(deadline);
          res.removeListener('close', onGone);
        }
      }
    } catch (error) {
      reservation.release();
      fail(res, error, request.id);
      return;
    }
    if (gone || res.destroyed) {
      reservation.release();
      return;
    }
    if (
      readChecked &&
      !warnedAnonymous &&
      isAnonymous(principal) &&
      (request.filter.resourceSubscriptions?.length ?? 0) > 0 &&
      honored.resourceSubscriptions === undefined
    ) {
      warnedAnonymous = true;
      logger.warn(ANONYMOUS_WITH_READ_CHECK);
    }
    if (stop?.signal.reason instanceof AuthorizeDeadlineError) {
      logger.warn(
        `authorization took longer than authorizeDeadlineMs (${String(authorizeDeadlineMs)} ms); the items not checked by then were left out of the acknowledgement`,
      );
    }
    // A bus that routes by interest subscribes to the keys new to this node first: the ack must not
    // go out before an event published elsewhere can reach the stream. Nothing to wait for otherwise.
    const following = reservation.follow(honored);
    if (following !== undefined) {
      const onGone = (): void => {
        gone = true;
      };
      res.once('close', onGone);
      reservation.cancellable(cancelled(res, onGone));
      await following;
      res.removeListener('close', onGone);
      if (gone || res.destroyed) {
        reservation.release();
        return;
      }
    }
    const idJson = JSON.stringify(request.id);
    try {
      reservation.open(res, {
        id: request.id,
        filter: honored,
        keepAliveMs: resolved.keepAliveMs,
        ackFrame: ackFrame(idJson, honored),
        resultFrame: result,
      });
      if (received !== undefined) recordAck(performance.now() - received);
    } catch (error) {
      reservation.release();
      // The hub closing while this request was being authorized is a refusal, not a failure.
      if (hasErrorCode(error, ErrorCode.Protocol)) refuse(res, error as ProtocolError);
      else fail(res, error, request.id);
    }
  }

  /**
   * What a `notifications/cancelled` does to a listen still waiting to open (the hub has given its slot
   * and bus interest back already): `onGone`, as if the client had left, and the response is ended as a
   * cancelled open stream's is (ListenStream's teardown): destroyed, with nothing written. Not a byte of
   * it was sent, and cancellation writes nothing more (spec §4): no JSON-RPC error, no acknowledgement.
   */
  function cancelled(res: StreamResponse, onGone: () => void): () => void {
    return () => {
      onGone();
      if (!res.writableEnded && !res.destroyed) res.destroy();
    };
  }

  /** Answers a refusal, counted by its reason in the hub's `stats().refusals`. */
  function refuse(res: StreamResponse, error: ProtocolError): void {
    engine.refused(error.reason);
    writeProtocolError(res, error);
  }

  function fail(res: StreamResponse, error: unknown, id: RequestId | null): void {
    logger.error('subscriptions/listen failed', { error });
    refuse(res, new ProtocolError('internal', 'Internal error', { id }));
    if (res.headersSent && !res.writableEnded && !res.destroyed) res.destroy();
  }

  function cancel(principal: string, body: unknown): boolean {
    // An anonymous identity is used by one request only: nothing else may cancel its stream.
    if (isAnonymous(principal)) return false;
    const requestId = cancelledRequestId(body);
    return requestId !== undefined && engine.cancel(principal, requestId) > 0;
  }

  return Object.freeze({
    options: resolved,
    handle,
    cancel,
    refused: (reason: RefusalReason) => engine.refused(reason),
  });
}
