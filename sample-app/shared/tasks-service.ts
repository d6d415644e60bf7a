/**
 * The tasks service: in-memory tasks of the Tasks extension (`io.modelcontextprotocol/tasks`), each
 * owned by the principal that created it. Status changes reach the owner's listen streams as
 * `notifications/tasks` carrying the task's full state (spec §3, §7).
 */
import { randomUUID } from 'node:crypto';
import type { SubscriptionHub, TaskState } from 'mcp-subscriptions';
import { forbidden, notFound } from './errors.ts';
import { objectBody, oneOf, optionalString } from './validation.ts';

/** The statuses of the Tasks extension. */
export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;

/** A task's status. */
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** How long a task is kept after it was created. Expired tasks are discarded (the spec allows it). */
export const TASK_TTL_MS = 60 * 60 * 1000;

/** How often a client is asked to poll at most. */
export const TASK_POLL_INTERVAL_MS = 5000;

/** Longest `statusMessage` accepted. */
export const MAX_STATUS_MESSAGE = 1024;

/** The hub events the tasks service emits. */
export type TaskEvents = Pick<SubscriptionHub, 'taskStatus'>;

interface StoredTask {
  readonly owner: string;
  readonly createdMs: number;
  state: TaskState;
}

/**
 * The status-specific fields the extension's `DetailedTask` requires: a completed task carries its
 * `result`, a failed one its JSON-RPC `error`, an `input_required` one its `inputRequests`. These
 * tasks stand for work driven from the REST API, so the payloads are placeholders of the right shape.
 */
function detailsFor(status: TaskStatus): Record<string, unknown> {
  switch (status) {
    case 'completed':
      return { result: { content: [{ type: 'text', text: 'Task completed.' }], isError: false } };
    case 'failed':
      return { error: { code: -32603, message: 'Task failed.' } };
    case 'input_required':
      return { inputRequests: {} };
    default:
      return {};
  }
}

/**
 * The tasks store.
 *
 * @example
 * ```ts
 * const tasks = new TasksService(hub);
 * const { taskId } = tasks.create('alice');
 * tasks.setStatus('alice', taskId, { status: 'completed' }); // emits notifications/tasks to alice
 * ```
 */
export class TasksService {
  // Insertion order is creation order, which lets expiry stop at the first live task.
  private readonly tasks = new Map<string, StoredTask>();

  constructor(
    private readonly events: TaskEvents,
    private readonly now: () => number = Date.now,
  ) {}

  /** Creates a task owned by `principal`, with status `working`. Emits nothing: nobody can listen for it yet. */
  create(principal: string): TaskState {
    this.expire();
    const createdMs = this.now();
    const at = new Date(createdMs).toISOString();
    const state: TaskState = Object.freeze({
      taskId: randomUUID(),
      status: 'working',
      createdAt: at,
      lastUpdatedAt: at,
      ttlMs: TASK_TTL_MS,
      pollIntervalMs: TASK_POLL_INTERVAL_MS,
    });
    this.tasks.set(state.taskId, { owner: principal, createdMs, state });
    return state;
  }

  /**
   * Sets a task's status (body `{ status, statusMessage? }`) and emits `notifications/tasks` with its
   * full state to the owner's streams. Throws a 404 for an unknown task, a 403 for another
   * principal's, a 400 naming the field for a bad body.
   */
  setStatus(principal: string, taskId: string, body: unknown): TaskState {
    const task = this.find(taskId);
    if (task === undefined) throw notFound('No such task');
    if (task.owner !== principal) throw forbidden('The task belongs to another principal');
    const fields = objectBody(body);
    const status = oneOf(fields, 'status', TASK_STATUSES);
    const statusMessage = optionalString(fields, 'statusMessage', MAX_STATUS_MESSAGE);
    const { taskId: id, createdAt, ttlMs, pollIntervalMs } = task.state;
    task.state = Object.freeze({
      taskId: id,
      status,
      ...(statusMessage !== undefined ? { statusMessage } : {}),
      createdAt,
      lastUpdatedAt: new Date(this.now()).toISOString(),
      ttlMs,
      ...(pollIntervalMs !== undefined ? { pollIntervalMs } : {}),
      ...detailsFor(status),
    });
    this.events.taskStatus(task.state, task.owner);
    return task.state;
  }

  /** A task's current state, when `principal` owns it. */
  get(principal: string, taskId: string): TaskState | undefined {
    const task = this.find(taskId);
    return task !== undefined && task.owner === principal ? task.state : undefined;
  }

  /**
   * The listen handler's task check: does `principal` own `taskId`? An unknown id and another
   * principal's id both answer `false`, so the acknowledgement reveals nothing (spec §7).
   */
  isOwner(taskId: string, principal: string): boolean {
    return this.find(taskId)?.owner === principal;
  }

  private find(taskId: string): StoredTask | undefined {
    const task = this.tasks.get(taskId);
    if (task === undefined || this.now() - task.createdMs < TASK_TTL_MS) return task;
    this.tasks.delete(taskId);
    return undefined;
  }

  private expire(): void {
    const now = this.now();
    for (const [taskId, task] of this.tasks) {
      if (now - task.createdMs < TASK_TTL_MS) break;
      this.tasks.delete(taskId);
    }
  }
}
