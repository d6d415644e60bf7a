// jest 30 in ES-module mode (npm scripts pass --experimental-vm-modules on Node 20). @swc/jest strips
// types and emits Nest's decorator metadata; the package's own entry points map to their sources, so
// tests exercise exactly what `npm run build` compiles.
/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/nest-compat/', '<rootDir>/test/consumers/'],
  modulePathIgnorePatterns: ['<rootDir>/test/nest-compat/', '<rootDir>/test/consumers/', '<rootDir>/dist/'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^mcp-subscriptions$': '<rootDir>/lib/index.ts',
    '^mcp-subscriptions/(express|nest|redis|client)$': '<rootDir>/adapters/$1/index.ts',
  },
  transform: {
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
  },
  testTimeout: 30_000,
};
