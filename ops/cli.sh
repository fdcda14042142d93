#!/usr/bin/env bash
# npm run cli -- <command> (and npm run migrate, npm run rebuild): the administrative commands,
# compiled as the service is, against DATABASE_URL or the embedded database under DATA_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ops/ensure-tools.sh
ensure_node_modules >&2
ensure_build >&2
exec node dist/src/cli.js "$@"
