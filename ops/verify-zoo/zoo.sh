#!/usr/bin/env bash
# npm run verify:zoo [-- member...]: installs what the zoo runs (node_modules, Debian's nginx-light, haproxy and
# redis-server), then verify's default command against each member (ops/verify-zoo/zoo.ts).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh
ensure_zoo_tools
exec node --import tsx ops/verify-zoo/zoo.ts "$@"
