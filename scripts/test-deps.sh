#!/usr/bin/env bash
# Installs what `make test` needs beyond Go, or explains how when it cannot:
#   - PostgreSQL server binaries (initdb, postgres): the tests start a throwaway cluster from them;
#   - Node.js with npx: the CardEncryption script's tests, and Redocly's CLI for the OpenAPI description;
#   - Chromium: the browser tests;
#   - axe-core (npm, pinned): the browser tests' accessibility checks, which put it into each page
#     they check; installed with npm into the user's cache directory, where the tests find it
#     (internal/browsertest.AxePath), so that no test fetches it;
#   - standardwebhooks (npm, pinned): the webhook tests verify deliveries with it under Node, from the
#     user's cache directory like axe-core (internal/webhook, KASSA_STANDARDWEBHOOKS);
#   - stripe-mock (with go install): the Stripe connector's tests of its requests against Stripe's API;
#   - systemd-analyze (Debian's systemd): the check of deploy/kassa.service;
#   - pdftotext (Debian's poppler-utils): the invoice PDF tests read the PDF's text back with it;
#   - Patroni, etcd, pgBackRest and haproxy (Debian's patroni, etcd-server, etcd-client, pgbackrest,
#     haproxy): the checks of deploy/ha and the short failover drill (cmd/kassa-load TestDrillHA).
#     Debian enables their services on install; this machine runs them only under the tests, so
#     they are disabled again.
# Without them those tests skip, except under KASSA_REQUIRE_ALL=1, where they fail.
set -u

have_postgres() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

apt_install() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    return 1
  fi
  echo "test-deps: installing $* with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1 && return 0
  apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1
}

if ! have_postgres; then
  if ! apt_install postgresql; then
    cat >&2 <<'MSG'
test-deps: PostgreSQL server binaries (initdb, postgres) are missing, and could not be installed here.
  On Debian or Ubuntu:  sudo apt-get install postgresql
  Or point the tests at a server you run:  export KASSA_TEST_DATABASE_URL=postgres://user:pass@host:5432/postgres
  Without either, the PostgreSQL tests are skipped (and fail under KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
if ! command -v npx >/dev/null 2>&1; then
  if ! apt_install nodejs npm; then
    cat >&2 <<'MSG'
test-deps: Node.js (npx) is missing, and could not be installed here.
  On Debian or Ubuntu:  sudo apt-get install nodejs npm
  Without it the OpenAPI validation test is skipped (and fails under KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && [ -z "${KASSA_CHROMIUM:-}" ]; then
  if ! apt_install chromium; then
    cat >&2 <<'MSG'
test-deps: Chromium is missing, and could not be installed here.
  On Debian:  sudo apt-get install chromium     (or set KASSA_CHROMIUM to a Chrome or Chromium binary)
  Without it the browser tests are skipped (and fail under KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
  if ! apt_install systemd; then
    cat >&2 <<'MSG'
test-deps: systemd-analyze is missing, and could not be installed here.
  On Debian or Ubuntu:  sudo apt-get install systemd
  Without it the check of deploy/kassa.service is skipped (and fails under KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
if ! command -v pdftotext >/dev/null 2>&1; then
  if ! apt_install poppler-utils; then
    cat >&2 <<'MSG'
test-deps: pdftotext is missing, and could not be installed here.
  On Debian or Ubuntu:  sudo apt-get install poppler-utils
  Without it the invoice PDF tests are skipped (and fail under KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
if ! command -v patroni >/dev/null 2>&1 || ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1 ||
  ! command -v pgbackrest >/dev/null 2>&1 || ! command -v haproxy >/dev/null 2>&1; then
  if apt_install patroni etcd-server etcd-client pgbackrest haproxy; then
    if command -v systemctl >/dev/null 2>&1; then
      systemctl disable --now etcd haproxy patroni >/dev/null 2>&1
    fi
  else
    cat >&2 <<'MSG'
test-deps: Patroni, etcd, pgBackRest or haproxy is missing, and could not be installed here.
  On Debian or Ubuntu:  sudo apt-get install patroni etcd-server etcd-client pgbackrest haproxy
  Without them the checks of deploy/ha and the failover drill's test are skipped (and fail under
  KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
# npm_dep NAME VERSION FILE ENVVAR POINT WHAT installs the npm package NAME@VERSION into the user's
# cache directory, unless ENVVAR is set (to node_modules/NAME followed by POINT) or FILE, a path inside
# the package, is there already.
npm_dep() {
  local name=$1 version=$2 file=$3 var=$4 point=$5 what=$6
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/kassa/$name-$version"
  if [ -n "$(printenv "$var")" ] || [ -f "$dir/node_modules/$name/$file" ]; then
    return 0
  fi
  echo "test-deps: installing $name $version with npm into $dir" >&2
  if ! command -v npm >/dev/null 2>&1 ||
    ! npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "$name@$version" >/dev/null 2>&1; then
    rm -rf "$dir"
    cat >&2 <<MSG
test-deps: $name $version could not be installed here (npm needs Node.js and the npm registry).
  Install it with:  npm install --prefix "$dir" $name@$version
  Or put it anywhere and point the tests at it:  export $var=/path/to/node_modules/$name$point
  Without it $what is skipped (and fails under KASSA_REQUIRE_ALL=1).
MSG
  fi
}
axe_core_version=4.14.1
npm_dep axe-core "$axe_core_version" axe.min.js KASSA_AXE_CORE /axe.min.js "the accessibility check"
standardwebhooks_version=1.1.1
npm_dep standardwebhooks "$standardwebhooks_version" package.json KASSA_STANDARDWEBHOOKS "" "the Node verification of webhook deliveries"
stripe_mock_version=v0.203.0
have_stripe_mock() {
  command -v stripe-mock >/dev/null 2>&1 && return 0
  local bin
  bin="$(${GO:-go} env GOBIN)"
  [ -n "$bin" ] || bin="$(${GO:-go} env GOPATH)/bin"
  [ -x "$bin/stripe-mock" ]
}
if ! have_stripe_mock; then
  echo "test-deps: installing stripe-mock $stripe_mock_version with go install" >&2
  if ! ${GO:-go} install "github.com/stripe/stripe-mock@$stripe_mock_version" >/dev/null 2>&1; then
    cat >&2 <<MSG
test-deps: stripe-mock could not be installed here (go install needs the Go module proxy or a module cache).
  Install it with:  go install github.com/stripe/stripe-mock@$stripe_mock_version
  Without it the Stripe connector's request tests are skipped (and fail under KASSA_REQUIRE_ALL=1).
MSG
  fi
fi
exit 0
