/**
 * What a Nest read guard's answer means for a URI, over real HTTP: Nest's guard consumer lets a request
 * through on a truthy answer only, so a guard that answers `undefined`, `null`, `0` or `''` (plainly,
 * through a Promise, or as the last value of an Observable) refuses the read, and the listen leaves that
 * URI out of its acknowledgement. Every shape is asked in one listen, beside URIs the same guard admits.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { of, type Observable } from 'rxjs';
import { recordingLogger } from '../helpers/fake-response.ts';
import { bearer, startNestApp, type NestTestApp } from '../helpers/nest-apps.ts';
import { listen, type SseStream } from '../helpers/sse.ts';

/** The answers a guard may give, by name in the URI. */
const ANSWERS: Readonly<Record<string, unknown>> = {
  undefined: undefined,
  null: null,
  zero: 0,
  empty: '',
  false: false,
  true: true,
  one: 1,
};
const SHAPES = ['plain', 'promise', 'observable'] as const;

/** Answers `note://<shape>/<answer>` with that answer, in that shape; admits everything that is not a read. */
@Injectable()
class AnswerGuard implements CanActivate {
  // Typed as Nest types a guard; the answers themselves are what a careless guard returns.
  canActivate(context: ExecutionContext): boolean | Promise<boolean> | Observable<boolean> {
    const req = context.switchToHttp().getRequest<{ body?: { method?: string; params?: { uri?: string } } }>();
    if (req.body?.method !== 'resources/read') return true;
    const [shape, name] = String(req.body.params?.uri).replace('note://', '').split('/') as [string, string];
    const answer = ANSWERS[name] as boolean;
    if (shape === 'promise') return Promise.resolve(answer);
    if (shape === 'observable') return of(answer);
    return answer;
  }
}

const apps: NestTestApp[] = [];
const streams: SseStream[] = [];
afterEach(async () => {
  for (const stream of streams.splice(0)) stream.close();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

describe('NestJS module: a read guard’s answer decides the URI as Nest decides a request', () => {
  it('undefined, null, 0 and "" refuse the URI, plain, as a Promise and as an Observable; truthy answers admit it', async () => {
    const logger = recordingLogger();
    const app = await startNestApp({ module: { guards: [AnswerGuard], hub: { logger } } });
    apps.push(app);
    const asked = SHAPES.flatMap((shape) => Object.keys(ANSWERS).map((name) => `note://${shape}/${name}`));
    const stream = await listen(app.url, 'answers', { resourceSubscriptions: asked }, bearer('alice-token'));
    streams.push(stream);
    expect(stream.status).toBe(200);
    const ack = (await stream.event(1)).json;
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect(ack.params.notifications).toStrictEqual({
      resourceSubscriptions: SHAPES.flatMap((shape) => [`note://${shape}/true`, `note://${shape}/one`]),
    });
    // A refusal is an answer, not a failure: nothing is logged.
    expect(logger.warns).toStrictEqual([]);
    expect(logger.errors).toStrictEqual([]);
    // The URIs left out get nothing; one admitted gets its update.
    app.hub.resourceUpdated('note://observable/null');
    app.hub.resourceUpdated('note://promise/true');
    const update = (await stream.event(2)).json;
    expect(update.params.uri).toBe('note://promise/true');
  });
});
