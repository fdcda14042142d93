#!/usr/bin/env bash
# npm test [-- filter...]: the whole suite against a throwaway PostgreSQL and Redis.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server --always
ensure_prometheus
exec node --import tsx ops/test-runner.ts "$@"
