/**
 * The stuck run's side of the healthy readers' process (healthy.ts, which says why they have a
 * process of their own): forks it, waits for it to be ready, marks each phase's beginning, and takes
 * its figures at the end.
 */
import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { ROOT } from '../harness.ts';
import type { HealthyConfig, HealthyReply, HealthyRequest, HealthyResult, Window } from './healthy.ts';

/** The healthy readers, in a process of their own (healthy.ts says why). */
export class HealthyProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly acked: number,
  ) {}

  static async start(config: HealthyConfig): Promise<HealthyProcess> {
    const child = fork(path.join(ROOT, 'tools/soak/stuck/healthy.ts'), [], {
      cwd: ROOT,
      execArgv: ['--conditions=mcp-subscriptions-source', '--import', 'tsx'],
      env: { ...process.env, SOAK_HEALTHY_CONFIG: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    process.once('exit', () => child.kill('SIGKILL'));
    const ready = await HealthyProcess.reply(child, 'ready', 60_000);
    return new HealthyProcess(child, ready.type === 'ready' ? ready.acked : 0);
  }

  private static reply(child: ChildProcess, type: HealthyReply['type'], ms: number): Promise<HealthyReply> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the healthy readers did not answer ${type} within ${ms} ms`)),
        ms,
      );
      const onExit = (code: number | null): void => reject(new Error(`the healthy readers exited with code ${code}`));
      child.once('exit', onExit);
      child.on('message', function onMessage(reply: HealthyReply) {
        if (reply.type !== type) return;
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(reply);
      });
    });
  }

  /** A phase begins: what the readers' own event loop went through so far belongs to the previous one. */
  mark(name: string): void {
    this.child.send({ type: 'mark', name } satisfies HealthyRequest);
  }

  /** The last event's number and the windows: they wait for it, measure, hang up and exit. */
  async finish(published: number, phases: readonly Window[], segments: readonly Window[]): Promise<HealthyResult> {
    const finished = HealthyProcess.reply(this.child, 'finished', 120_000);
    this.child.send({ type: 'finish', published, phases, segments } satisfies HealthyRequest);
    const reply = await finished;
    return reply.type === 'finished' ? reply.result : Promise.reject(new Error('unexpected reply'));
  }
}
