# syntax=docker/dockerfile:1
# Paceline's image: the compiled service (dist/) on Node.js with its production dependencies only.
# It needs DATABASE_URL, REDIS_URL and CURSOR_SECRET (no embedded stores in the image). Build from
# the repository root:  docker build -t paceline .   (docs/scaling.md "Deployment files").
# The Node.js release every stage runs, pinned to its exact version: the one package.json's node-linux-*
# packages bring to `npm start` and `npm test` (docs/operations.md "Upgrading the runtime" moves both).
ARG NODE_VERSION=24.22.3

# Build: every dependency, then esbuild to dist/ plus the runtime files that are not TypeScript
# (src/throttle/ring.lua, ...), as `npm run build` does. Without install scripts esbuild still
# runs: it finds its binary in its platform's optional package (@esbuild/linux-x64, -arm64).
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY ops/build.mjs ops/build.mjs
COPY src src
COPY workers workers
COPY db db
RUN node ops/build.mjs

# Production dependencies only: no dev tools, no optional platform binaries (the embedded
# PostgreSQL that `npm start` uses without DATABASE_URL), no install scripts.
FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force

# Runtime: package.json (it makes dist/ ES modules), node_modules and dist/, owned by root and run
# by the image's unprivileged `node` user (uid 1000), so the root filesystem can be read-only.
# HOST=0.0.0.0: the API on every interface of the container (the default, 127.0.0.1, is the
# container's own loopback, which no published port reaches).
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8000 \
    METRICS_PORT=9464
WORKDIR /app
COPY package.json ./
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
USER 1000:1000
EXPOSE 8000 9464
# Slim images have no curl: Node's fetch. A web host answers /healthz on PORT; a ROLE=jobs host
# serves no API, so its primary's /metrics on METRICS_PORT stands in.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "const jobs = process.env.ROLE === 'jobs'; const url = jobs ? `http://127.0.0.1:${process.env.METRICS_PORT || 9464}/metrics` : `http://127.0.0.1:${process.env.PORT || 8000}/healthz`; fetch(url, { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1));"]
# node is PID 1: it handles SIGTERM itself (drains its children within SHUTDOWN_TIMEOUT_MS).
CMD ["node", "dist/src/main.js"]
