#!/usr/bin/env bash
# npm start: installs what is missing, then runs the service. With DATABASE_URL and REDIS_URL
# unset, src/main.ts starts embedded PostgreSQL and Redis with their data under .data/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules
ensure_redis_server
exec node --import tsx src/main.ts "$@"
