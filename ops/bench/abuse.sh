#!/usr/bin/env bash
# npm run bench:abuse: installs what the abuse benchmark needs (wrk, redis-server), builds dist/
# when a source changed, then runs ops/bench/abuse.ts (BENCH_ROUNDS, BENCH_SECONDS). It holds
# 4,000 idle connections at once, so it raises the open-file limit as far as it may.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server --always
ensure_wrk
ensure_build
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != "unlimited" ] && [ "$(ulimit -n)" -lt 10000 ]; then
  echo "the open-file limit is $(ulimit -n): the benchmark holds 4,000 connections and needs 10,000 (ulimit -n 10000)" >&2
  exit 1
fi
exec node --import tsx ops/bench/abuse.ts "$@"
