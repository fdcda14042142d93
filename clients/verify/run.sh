#!/usr/bin/env bash
# npm run verify: installs the dependencies when missing or stale (as npm start does, from a fresh clone),
# then runs the checker (docs/verify.md). Its arguments pass through unchanged.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_node_modules >&2 || {
  echo "verify: installing its dependencies (npm ci) failed: run npm ci and try again" >&2
  exit 2
}
exec node --import tsx clients/verify/main.ts "$@"
