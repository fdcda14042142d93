#!/usr/bin/env bash
# npm run bench: installs what the read-path benchmark needs (wrk, redis-server), builds dist/
# when a source changed, then runs ops/bench/read-path.ts (BENCH_TASKS, BENCH_SECONDS, BENCH_ROUNDS).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server --always
ensure_wrk
ensure_build
exec node --import tsx ops/bench/read-path.ts "$@"
