#!/usr/bin/env bash
# npm run bench:overload: installs what the overload benchmark needs (redis-server; npm ci when
# node_modules is missing), builds dist/ when a source changed, raises the open-file limit (it holds
# 2,000 connections at once) as far as it may, then runs ops/bench/overload.ts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server --always
ensure_build
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec node --import tsx ops/bench/overload.ts "$@"
