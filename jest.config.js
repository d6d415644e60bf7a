// jest 30 in ES-module mode (npm scripts pass --experimental-vm-modules on Node 20). @swc/jest strips
// types and emits Nest's decorator metadata; the package's own entry points map to their sources, so
// tests exercise exactly what `npm run build` compiles.
//
// Three tiers, one jest project each, by folder (CONTRIBUTING.md says what goes where):
// - unit: test/unit, no sockets (fake responses, fake timers); seconds.
// - integration: test/integration, loopback HTTP and a real Redis, all in the jest process.
// - system: test/system, sample processes, the packed tarball's examples and consumers, both Nest
//   majors, soak, stuck, fault and fuzz suites.
// `npm test` runs unit and integration; `npm run test:system` the third; CI runs all three.
import path from 'node:path';

const transform = {
  '^.+\\.ts$': [
    '@swc/jest',
    {
      jsc: {
        target: 'es2022',
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
        keepClassNames: true,
      },
      module: { type: 'es6' },
      sourceMaps: 'inline',
    },
  ],
};

/**
 * @param {'unit' | 'integration' | 'system'} tier
 * @param {string[]} [alsoRun] test files outside test/ that the tier runs as well
 */
const project = (tier, alsoRun = []) => ({
  displayName: tier,
  testEnvironment: 'node',
  roots: [`<rootDir>/test/${tier}`, ...alsoRun.map((file) => path.posix.dirname(file))],
  testMatch: [`<rootDir>/test/${tier}/**/*.test.ts`, ...alsoRun],
  modulePathIgnorePatterns: ['<rootDir>/test/nest-compat/', '<rootDir>/test/consumers/', '<rootDir>/dist/'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^mcp-subscriptions$': '<rootDir>/lib/index.ts',
    '^mcp-subscriptions/(express|fastify|nest|redis|postgres|client)$': '<rootDir>/adapters/$1/index.ts',
  },
  transform,
});

/** @type {import('jest').Config} */
export default {
  projects: [
    project('unit'),
    // The client example (docs/client.md) is examples/express's own test, and examples/fastify has its twin:
    // run here from the sources, and by each example's `npm test` from the packed tarball
    // (test/system/examples.test.ts).
    project('integration', [
      '<rootDir>/examples/express/src/app.test.ts',
      '<rootDir>/examples/fastify/src/app.test.ts',
    ]),
    project('system'),
  ],
  testTimeout: 30_000,
};
