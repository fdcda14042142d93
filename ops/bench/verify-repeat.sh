#!/usr/bin/env bash
# npm run bench:verify [-- runs [minutes]]: installs what the repeat bench starts (node_modules, Debian's
# nginx-light, haproxy and redis-server, which brings redis-cli), then runs ops/bench/verify-repeat.ts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_zoo_tools
exec node --import tsx ops/bench/verify-repeat.ts "$@"
