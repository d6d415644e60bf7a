/**
 * What escapes the code under test without reaching it: a promise rejected with nobody listening, an
 * exception thrown from a callback. Neither fails a jest test by itself (the rejection is only logged,
 * or lands on whichever test runs next), so the suites that feed the engine hostile input record both
 * and assert them empty.
 */

/** Records unhandled rejections and uncaught exceptions between `start()` and `stop()`. */
export class UnhandledTracker {
  /** Reasons of the rejections no handler took. */
  readonly rejections: unknown[] = [];
  /**
   * Uncaught exceptions, seen through `'uncaughtExceptionMonitor'`: it watches without handling, so
   * Node (and jest) still treat the exception as they would without the tracker.
   */
  readonly exceptions: unknown[] = [];

  private readonly onRejection = (reason: unknown): void => void this.rejections.push(reason);
  private readonly onException = (error: unknown): void => void this.exceptions.push(error);

  start(): void {
    process.on('unhandledRejection', this.onRejection);
    process.on('uncaughtExceptionMonitor', this.onException);
  }

  stop(): void {
    process.off('unhandledRejection', this.onRejection);
    process.off('uncaughtExceptionMonitor', this.onException);
  }

  /** Forgets what was recorded (a property test's next case starts clean). */
  clear(): void {
    this.rejections.length = 0;
    this.exceptions.length = 0;
  }
}
