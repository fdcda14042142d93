#!/usr/bin/env bash
# npm test [-- filter...]: the suite against a throwaway PostgreSQL and Redis (test/run.ts, which
# installs only the tools the chosen files need). Without a filter, the lint (npm run lint) runs
# beside the suite, on the CPU the suite's start leaves idle; its output follows the suite's, and
# a change that breaks it fails the run. npm run test:unit runs the pure tests alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules
if [ "$#" -ne 0 ]; then
  exec node --import tsx test/run.ts "$@"
fi
lint_log="$(mktemp)"
trap 'rm -f "$lint_log"' EXIT
npm run --silent lint >"$lint_log" 2>&1 &
lint_pid=$!
suite=0
node --import tsx test/run.ts || suite=$?
lint=0
wait "$lint_pid" || lint=$?
echo
echo "lint: npm run lint"
cat "$lint_log"
if [ "$lint" -ne 0 ]; then
  echo "the lint failed (exit $lint): npm run lint shows the same"
  exit 1
fi
exit "$suite"
