// Lint rules: ESLint's and typescript-eslint's recommended sets, formatting left to Prettier, and
// the import directions of docs/architecture.md ("Which way imports go") where a rule can say them.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** The HTTP side of the service: what the domain, the stores and the caches never import. */
const httpLayer = ['**/api/**', '**/edge/**', '**/listener/**', '**/server/**'];
const outsideRuntime = {
  group: ['**/ops/**', '**/test/**'],
  message: 'Runtime code (src/, workers/, db/) never imports ops/ or test/.',
};

// Only a start without a store's URL loads the embedded servers; ESLint's rule leaves import() alone.
const embeddedLazily = {
  group: ['**/embedded/**'],
  message:
    'src/embedded/ is loaded only when a store has no URL: import() it where the stores start ' +
    '(src/cluster/backends.ts, src/cli/database.ts).',
};

// package.json "//": libraries only the benchmarks use, so nothing else may come to depend on them.
const benchmarkOnly = ['autocannon', 'koa-ratelimit', 'rate-limiter-flexible'].map((name) => ({
  name,
  message: `${name} is a benchmark-only dependency (ops/bench/).`,
}));

/** The import rule every runtime file has, with a room's own `patterns` added (a later block replaces, not merges). */
const runtimeImportsBut = (...patterns) => [
  'error',
  { paths: benchmarkOnly, patterns: [outsideRuntime, embeddedLazily, ...patterns] },
];
const runsBeforeKoa = { group: ['koa', '@koa/*'], message: 'The listener runs before Koa: it imports no Koa.' };
const wrappedByTheListener = {
  group: ['**/listener/**'],
  message: 'The listener wraps the app; the app never imports it.',
};

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: { globals: globals.node },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-imports': ['error', { paths: benchmarkOnly, patterns: [outsideRuntime, embeddedLazily] }],
      // Parsers of query strings and integers match control characters on purpose.
      'no-control-regex': 'off',
      // A variable a closure reads before its one assignment stays a let.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // A runtime file a reader takes in whole: past 250 lines, it holds more than one idea (docs/architecture.md).
    files: ['src/**/*.ts', 'workers/**/*.ts', 'db/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 250 }] },
  },
  {
    files: ['src/events/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            outsideRuntime,
            {
              group: [...httpLayer, 'koa', '@koa/*'],
              message: 'The domain knows no HTTP: views, status codes and query parsing live in src/api/.',
            },
            {
              group: ['**/pagination/**'],
              allowTypeImports: true,
              message: 'The domain may name pagination types, not call its code.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/pagination/**/*.ts', 'src/throttle/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            outsideRuntime,
            embeddedLazily,
            {
              group: ['koa', '@koa/*', ...httpLayer],
              message: 'Domain code never imports Koa or the HTTP layer.',
            },
          ],
        },
      ],
    },
  },
  {
    // Settings and the parsers they use are the ground floor: any process reads them before it has a store.
    files: ['src/settings/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            outsideRuntime,
            {
              group: [
                '**/stores/**',
                '**/embedded/**',
                '**/api/**',
                '**/edge/**',
                '**/listener/**',
                '**/server/**',
                '**/cluster/**',
                '**/events/**',
                '**/read-cache/**',
                '**/auth/**',
              ],
              message: 'Settings import no store, server or domain code: only pure parsers (throttle/rate, ipv6).',
            },
          ],
        },
      ],
    },
  },
  {
    // The production clients: an answer's refusal (AppError) is the HTTP layer's to make.
    files: ['src/stores/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            outsideRuntime,
            embeddedLazily,
            {
              group: ['koa', '@koa/*', ...httpLayer, '**/base/errors.js'],
              message: 'Stores never import the HTTP layer or its answers (AppError).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/read-cache/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            outsideRuntime,
            embeddedLazily,
            {
              group: ['koa', '@koa/*', ...httpLayer],
              message: 'The read cache never imports the HTTP layer.',
            },
          ],
        },
      ],
    },
  },
  {
    // The embedded servers are started by the primary and the CLI; they import no room above the stores.
    files: ['src/embedded/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            outsideRuntime,
            {
              group: [
                'koa',
                '@koa/*',
                '**/api/**',
                '**/edge/**',
                '**/listener/**',
                '**/server/**',
                '**/cluster/**',
                '**/cli/**',
                '../cli.js',
                '../main.js',
              ],
              message: 'The embedded servers import no server, cluster or CLI code.',
            },
          ],
        },
      ],
    },
  },
  {
    // The request's rooms in the order of its journey (docs/architecture.md "Which way imports go"): the listener
    // before Koa wraps the app, the app mounts the middleware, and neither is imported by what it wraps.
    files: ['src/listener/**/*.ts'],
    rules: { 'no-restricted-imports': runtimeImportsBut(runsBeforeKoa) },
  },
  {
    files: ['src/api/**/*.ts'],
    rules: { 'no-restricted-imports': runtimeImportsBut(wrappedByTheListener) },
  },
  {
    files: ['src/edge/**/*.ts'],
    rules: {
      'no-restricted-imports': runtimeImportsBut({
        group: ['**/api/**', '**/listener/**'],
        message: 'The middleware sits below the app that mounts it and the listener that wraps the app.',
      }),
    },
  },
  {
    // The document builder collects what the route files declare; it never imports them back.
    files: ['src/api/openapi/**/*.ts'],
    rules: {
      'no-restricted-imports': runtimeImportsBut(wrappedByTheListener, {
        group: ['../*/*.routes.js', '../*/*.operations.js', '../resources.js', '../app.js'],
        message: 'Route files import openapi/, not the other way round (docs/architecture.md "API document").',
      }),
    },
  },
  {
    // Benchmarks and scripts may use what the tests share (test/helpers/).
    files: ['ops/**/*.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // Tests own their tooling: nothing under test/ reaches into ops/.
    files: ['test/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...benchmarkOnly,
            {
              name: 'uvu',
              importNames: ['suite'],
              message:
                "Take suite from test/helpers/suite.ts: uvu's runner swallows what a before or after hook throws.",
            },
          ],
          patterns: [
            {
              group: ['**/ops/**'],
              message: 'Tests keep their runner and helpers under test/; they never import ops/.',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests and benchmarks run the stores as shipped (docs/testing.md "Stores as shipped"): a Redis
    // is started only by startRedis, whose options must carry a password (the service's ACL user)
    // or a withoutPassword reason; a redis-server spawned by hand would escape that check.
    files: ['src/**/*.ts', 'test/**/*.ts', 'ops/**/*.ts', 'clients/**/*.ts', 'workers/**/*.ts'],
    ignores: ['src/embedded/redis.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            'CallExpression[callee.name=/^(spawn|spawnSync|execFile|execFileSync|exec|execSync|fork)$/] > Literal[value=/redis-server/]',
          message:
            'Start Redis with startRedis (src/embedded/redis.ts): it runs as npm start runs it (a password, the ' +
            "service's ACL user); a test about their absence passes withoutPassword with its reason.",
        },
      ],
    },
  },
  {
    files: ['test/helpers/suite.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // Tests read JSON bodies loosely; migrations take Kysely<any>, as kysely's own examples do.
    files: ['test/**/*.ts', 'db/migrations/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
