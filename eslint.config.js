// ESLint flat config: typescript-eslint's type-checked rules, plus the import boundaries of the
// layout (lib/ knows no framework; adapters, the client included, reach lib only through its two doors,
// never each other; the client speaks HTTP through fetch; host apps use the published entries only).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const frameworks = ['express', 'express4', '@nestjs/*', 'ioredis', 'redis', 'pg', 'rxjs', 'class-validator'];

// lib/ imports only node:* and itself.
const libPatterns = [
  { group: frameworks, message: 'lib/ is framework-free: it imports only node:* and itself.' },
  { group: ['../adapters/*', '../sample-app/*', '../*/**'], message: 'lib/ imports only itself.' },
];

// What lib/core.ts reaches at run time: the client loads it, and nothing of the server with it.
const coreFiles = ['core', 'errors', 'validate', 'events'];

export default tseslint.config(
  // test/nest-compat/: apps for another Nest major each; test/consumers/: projects compiled against the packed
  // package in each module mode; examples/: apps with their own package.json, whose imports resolve only once
  // their own dependencies are installed. Each is type-checked by its own tsconfig when its test builds it.
  {
    ignores: [
      'node_modules/',
      'dist/',
      '.dist-*/',
      'bench/results/',
      '.conformance/',
      'eslint.config.js',
      'jest.config.js',
      'test/nest-compat/',
      'test/consumers/',
      'examples/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['lib/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: libPatterns,
        },
      ],
    },
  },
  {
    // The client's core: leaves only at run time (types may come from anywhere in lib/, they are erased).
    files: coreFiles.map((name) => `lib/${name}.ts`),
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...libPatterns,
            {
              regex: '^node:',
              allowTypeImports: true,
              message: 'lib/core.ts and the leaves behind it import no node:* module: the client loads them.',
            },
            {
              regex: `^\\./(?!(${coreFiles.join('|')})\\.ts$)`,
              allowTypeImports: true,
              message: `lib/core.ts stands on leaves only (${coreFiles.map((name) => `${name}.ts`).join(', ')}), types aside.`,
            },
          ],
        },
      ],
    },
  },
  {
    files: ['adapters/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./\\.\\./lib/(?!(index|internal)\\.ts$)',
              message:
                'Adapters import lib only through its doors: lib/index.ts (public) and lib/internal.ts (theirs).',
            },
            { regex: '^\\.\\./(?!\\.\\./lib/)', message: 'An adapter never imports another adapter.' },
          ],
        },
      ],
    },
  },
  {
    // The client runs in apps that have none of the server's frameworks: lib through its doors like every
    // adapter (what it needs there is lib/core.ts, re-exported by the adapters' door), and HTTP through
    // fetch only (the caller may hand its own).
    files: ['adapters/client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['node:http', 'http', 'node:https', 'https', 'node:http2', 'http2', 'node:net', 'net', 'undici'].map(
            (name) => ({ name, message: 'The client speaks HTTP through fetch only (global, or options.fetch).' }),
          ),
          patterns: [
            { group: frameworks, message: 'The client imports no framework.' },
            {
              regex: '^\\.\\./\\.\\./lib/(?!(index|internal)\\.ts$)',
              message:
                "The client imports lib only through its doors: lib/index.ts (public) and lib/internal.ts (the adapters'), which re-exports lib/core.ts.",
            },
            { regex: '^\\.\\./(?!\\.\\./lib/)', message: 'An adapter never imports another adapter.' },
          ],
        },
      ],
    },
  },
  {
    files: ['sample-app/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)(lib|adapters)/',
              message:
                'The samples are host apps: they import the published entries (mcp-subscriptions, /express, /fastify, /nest, /redis, /postgres) only.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
);
