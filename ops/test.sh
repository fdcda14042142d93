#!/usr/bin/env bash
# npm test [-- filter...]: the suite against a throwaway PostgreSQL and Redis (test/run.ts, which
# installs only the tools the chosen files need). Without a filter, the lint (npm run lint) runs
# first: a change that breaks it fails the suite. npm run test:unit runs the pure tests alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules
if [ "$#" -eq 0 ]; then
  echo "lint: npm run lint"
  npm run --silent lint
fi
exec node --import tsx test/run.ts "$@"
