# Sourced from the repository root by ops/start.sh, ops/cli.sh, ops/bench/bench.sh and the
# test runner (test/runner/tools.ts): installs and builds what a fresh machine with only Node lacks.
# Functions only; the caller decides which tools it needs.

PACELINE_TOOLS_LOG=".data/install.log"
paceline_apt_updated=""

# Installs node_modules when missing or older than package-lock.json, then makes sure every later
# `node` is the runtime it brought (ensure_node_runtime).
ensure_node_modules() {
  if ! [ -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "installing dependencies (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
  fi
  ensure_node_runtime
}

# Runs every later `node` on the line package.json's engines names (docs/operations.md "Upgrading the
# runtime"): npm ci links it as node_modules/.bin/node (the node-linux-* packages), which npm run puts
# first on PATH; put it there for a script run by bash alone too. Another line stops here in one line.
ensure_node_runtime() {
  PATH="$PWD/node_modules/.bin:$PATH"
  hash -r
  local wanted have
  wanted="$(sed -n 's/^ *"node": "\([0-9]*\)\.x".*/\1/p' package.json | head -n 1)"
  have="$(node -p 'process.versions.node' 2>/dev/null || echo none)"
  if [ "${have%%.*}" != "$wanted" ]; then
    echo "Paceline runs on Node.js $wanted, and $(command -v node || echo node) is $have:" \
      "npm ci brings it on Linux x64 and arm64 (node_modules/.bin/node); elsewhere install Node.js $wanted" >&2
    exit 1
  fi
}

# Compiles the service to dist/ (npm run build) when dist/ is missing or any source, build
# setting or dependency is newer than its last build (dist/.build-stamp, dated when it began).
ensure_build() {
  if [ -f dist/.build-stamp ] && [ -z "$(find src workers db ops/build.mjs package.json package-lock.json \
    tsconfig.json tsconfig.build.json -newer dist/.build-stamp -print -quit 2>/dev/null)" ]; then
    return 0
  fi
  echo "building dist/ (npm run build)"
  node ops/build.mjs
}

# Installs Debian packages quietly when running as root with apt-get; returns 1 otherwise.
paceline_apt_install() {
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    return 1
  fi
  mkdir -p "$(dirname "$PACELINE_TOOLS_LOG")"
  if [ -z "$paceline_apt_updated" ]; then
    apt-get update -qq >>"$PACELINE_TOOLS_LOG" 2>&1 || return 1
    paceline_apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$PACELINE_TOOLS_LOG" 2>&1
}

# Makes sure redis-server exists. With --always it is needed even when REDIS_URL is set
# (the tests start their own); otherwise REDIS_URL or REDIS_CLUSTER_NODES pointing elsewhere is enough.
ensure_redis_server() {
  if [ "${1:-}" != "--always" ] && [ -n "${REDIS_URL:-}${REDIS_CLUSTER_NODES:-}" ]; then
    return 0
  fi
  paceline_require redis-server redis-server "the embedded Redis (or set REDIS_URL)"
}

# Makes sure the command $1 exists, installing Debian's package $2 when it can (as root with
# apt-get); otherwise ends the caller with one line naming the package and what $3 needs it for.
paceline_require() {
  local command="$1" package="$2" purpose="$3"
  if command -v "$command" >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "$command not found: installing Debian's $package (log: $PACELINE_TOOLS_LOG)"
    if paceline_apt_install "$package" && command -v "$command" >/dev/null 2>&1; then
      return 0
    fi
    echo "installing $package failed (see $PACELINE_TOOLS_LOG): install it (sudo apt-get install $package) for $purpose" >&2
    exit 1
  fi
  echo "$command not found: install it (sudo apt-get install $package) for $purpose" >&2
  exit 1
}

# prometheus (and promtool): the tests that scrape the service and check the alert rules.
ensure_prometheus() {
  paceline_require prometheus prometheus "the tests that scrape metrics with it"
}

# haproxy: the load balancer the multi-host test puts in front of two hosts (ops/haproxy/).
ensure_haproxy() {
  paceline_require haproxy haproxy "the test of two hosts behind a load balancer"
}

# nginx (Debian's nginx-light): the limit_req member of npm run verify:zoo (ops/verify-zoo/).
ensure_nginx() {
  paceline_require nginx nginx-light "npm run verify:zoo"
}

# Everything the verify zoo starts (ops/verify-zoo/), for npm run verify:zoo and npm run bench:verify.
ensure_zoo_tools() {
  ensure_node_modules
  ensure_nginx
  ensure_haproxy
  ensure_redis_server --always
}

# wrk: the HTTP load generator of npm run bench.
ensure_wrk() {
  paceline_require wrk wrk "npm run bench"
}

# ss (Debian's iproute2): the test that reads the listening socket's backlog.
ensure_ss() {
  paceline_require ss iproute2 "the test of the listening socket's backlog"
}

# chromium: the test that drives the docs page (GET /api/docs/) headless with playwright-core.
ensure_chromium() {
  paceline_require chromium chromium "the docs page test"
}
