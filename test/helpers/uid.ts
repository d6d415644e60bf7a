/**
 * Names no earlier test of the file used. The counter is the module's, and jest gives every test file
 * a module registry of its own: names are unique within a file, and helpers that name things (the
 * sentinel and the warm-up of test/helpers/two-instances.ts) draw from the same counter as the suite.
 */

let counter = 0;

/** `prefix-N`, N never used before in this file: every test works on notes and ids of its own. */
export const uid = (prefix: string): string => `${prefix}-${++counter}`;
