#!/usr/bin/env bash
# npm run bench:against -- <dir>: installs what the benchmark needs (redis-server, wrk; npm ci when node_modules is
# missing), builds dist/ when a source changed, then runs ops/bench/against.ts against the build in <dir>.
set -euo pipefail
# The other build, as an absolute path: the benchmark runs from the repository's root.
other="${1:-}"
[ -n "$other" ] && [ -d "$other" ] && other="$(cd "$other" && pwd)"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server --always
ensure_wrk
ensure_build
exec node --import tsx ops/bench/against.ts "$other"
