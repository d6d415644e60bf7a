/**
 * The load generator, in its own process: `bench/run.ts` forks it once per scenario with the ports
 * of the three servers; it runs that scenario's load (scenarios/<name>.ts), which drives them one
 * after the other (or alternately, where drift matters), and sends back the raw figures over IPC.
 * Every loop is bounded in count and time.
 */
import type { BenchPostgres, Fleet, Nodes, Ports, Target } from './scenario.ts';
import { SCENARIOS } from './scenarios/index.ts';

export interface LoadRequest {
  readonly scenario: string;
  readonly ports: Ports;
  readonly targets: readonly Target[];
  readonly params: Record<string, any>;
  readonly timeoutMs: number;
  /** Only for a scenario with `redisNodes`. */
  readonly nodes?: Nodes;
  /** Only for a fleet scenario: this run's routing mode and its nodes. */
  readonly fleet?: Fleet;
  /** The bench's PostgreSQL: for a scenario with `postgresNodes` or `postgresServer`. */
  readonly postgres?: BenchPostgres;
}

// Run as the forked load process: one request in, one result out, then exit.
if (process.send !== undefined) {
  process.once('message', (message: LoadRequest) => {
    setTimeout(() => {
      process.send!({ ok: false, error: `load: ${message.scenario} exceeded ${message.timeoutMs} ms` });
      process.exit(4);
    }, message.timeoutMs).unref();
    const scenario = SCENARIOS.find((s) => s.name === message.scenario);
    if (scenario === undefined) {
      process.send!({ ok: false, error: `unknown scenario ${message.scenario}` });
      process.exit(2);
    }
    scenario.run(message.ports, message.targets, message.params, message.nodes, message.fleet, message.postgres).then(
      (result) => process.send!({ ok: true, result }, () => process.exit(0)),
      (error: unknown) =>
        process.send!(
          { ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) },
          () => process.exit(1),
        ),
    );
  });
}
