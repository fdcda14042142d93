# Sourced by ops/start.sh, ops/cli.sh, ops/test.sh and ops/bench/read-path.sh from the repository
# root: installs and builds what a fresh machine with only Node lacks. Functions only; the caller
# decides which tools it needs.

PACELINE_TOOLS_LOG=".data/install.log"
paceline_apt_updated=""

# Installs node_modules when missing or older than package-lock.json.
ensure_node_modules() {
  if [ -d node_modules ] && ! [ package-lock.json -nt node_modules/.package-lock.json ]; then
    return 0
  fi
  echo "installing dependencies (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
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
  if command -v redis-server >/dev/null 2>&1; then
    return 0
  fi
  if [ "${1:-}" != "--always" ] && [ -n "${REDIS_URL:-}${REDIS_CLUSTER_NODES:-}" ]; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis-server not found: installing Debian's redis-server (log: $PACELINE_TOOLS_LOG)"
    if paceline_apt_install redis-server && command -v redis-server >/dev/null 2>&1; then
      return 0
    fi
    echo "installing redis-server failed: see $PACELINE_TOOLS_LOG, or set REDIS_URL" >&2
    exit 1
  fi
  echo "redis-server not found: install it (sudo apt-get install redis-server) or set REDIS_URL" >&2
  exit 1
}

# Installs prometheus when it can, for the tests that scrape metrics with it. Never fails the
# caller: tests that use prometheus are expected to skip when it is missing.
ensure_prometheus() {
  if command -v prometheus >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "prometheus not found (sudo apt-get install prometheus): its tests will be skipped"
    return 0
  fi
  echo "prometheus not found: installing Debian's prometheus (log: $PACELINE_TOOLS_LOG)"
  if ! paceline_apt_install prometheus || ! command -v prometheus >/dev/null 2>&1; then
    echo "installing prometheus failed (see $PACELINE_TOOLS_LOG): its tests will be skipped"
  fi
  return 0
}

# Makes sure haproxy (the load balancer the multi-host test puts in front of two hosts, and the
# example of ops/haproxy/) exists, installing Debian's package when it can.
ensure_haproxy() {
  if command -v haproxy >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "haproxy not found: installing Debian's haproxy (log: $PACELINE_TOOLS_LOG)"
    if paceline_apt_install haproxy && command -v haproxy >/dev/null 2>&1; then
      return 0
    fi
    echo "installing haproxy failed: see $PACELINE_TOOLS_LOG" >&2
    exit 1
  fi
  echo "haproxy not found: install it (sudo apt-get install haproxy) and run npm test again" >&2
  exit 1
}

# Makes sure wrk (the HTTP load generator of npm run bench) exists, installing Debian's package
# when it can.
ensure_wrk() {
  if command -v wrk >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "wrk not found: installing Debian's wrk (log: $PACELINE_TOOLS_LOG)"
    if paceline_apt_install wrk && command -v wrk >/dev/null 2>&1; then
      return 0
    fi
    echo "installing wrk failed: see $PACELINE_TOOLS_LOG" >&2
    exit 1
  fi
  echo "wrk not found: install it (sudo apt-get install wrk) and run npm run bench again" >&2
  exit 1
}

# Installs Debian's chromium when it can, for the test that drives the docs page (GET /api/docs/)
# in a headless browser with playwright-core. Never fails the caller; that test fails without it.
ensure_chromium() {
  if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    return 0
  fi
  echo "chromium not found: installing Debian's chromium (log: $PACELINE_TOOLS_LOG)"
  if ! paceline_apt_install chromium || ! command -v chromium >/dev/null 2>&1; then
    echo "chromium could not be installed (see $PACELINE_TOOLS_LOG): install it (sudo apt-get install chromium) for the docs page test" >&2
  fi
  return 0
}
