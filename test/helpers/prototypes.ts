/**
 * Prototype pollution, detected: the suites that feed hostile JSON (`__proto__`, `constructor`,
 * `prototype` keys) to the engine check after every case that no shared prototype gained a property.
 */
import { expect } from '@jest/globals';
import { EventEmitter } from 'node:events';

// Object.prototype of the test's realm (where lib/ and Express run) and of Node's own (node:http's
// requests and headers), Array.prototype and Function.prototype: a `__proto__` that reached any would
// show as a new property.
const realms = {
  test: Object.prototype,
  node: Object.getPrototypeOf(EventEmitter.prototype) as object,
  array: Array.prototype,
  function: Function.prototype,
};
/** Their own keys when the suite loaded this module, before its first case. */
const pristine = Object.fromEntries(Object.entries(realms).map(([name, proto]) => [name, Reflect.ownKeys(proto)]));

/** Asserts that no prototype gained or lost a key since the suite loaded, and that `{}` is still plain. */
export function expectUnpolluted(): void {
  expect(
    Object.fromEntries(Object.entries(realms).map(([name, proto]) => [name, Reflect.ownKeys(proto)])),
  ).toStrictEqual(pristine);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(Object.getPrototypeOf({})).toBe(Object.prototype);
}
