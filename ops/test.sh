#!/usr/bin/env bash
# npm test [-- filter...]: the whole suite against a throwaway PostgreSQL and Redis. Without a
# filter, the lint (npm run lint) runs first: a change that breaks it fails the suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server --always
ensure_prometheus
ensure_chromium
ensure_haproxy
if [ "$#" -eq 0 ]; then
  echo "lint: eslint and prettier"
  npx --no-install eslint . && npx --no-install prettier --check . >/dev/null
fi
exec node --import tsx ops/test-runner.ts "$@"
