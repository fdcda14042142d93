#!/usr/bin/env bash
# npm start: installs what is missing, builds dist/ when a source changed, then runs the compiled
# service. With DATABASE_URL and REDIS_URL unset, it starts embedded PostgreSQL and Redis with
# their data under .data/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server
ensure_build
exec node dist/src/main.js "$@"
