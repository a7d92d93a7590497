#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for StorageOps: Debian packages when missing, a
# virtual environment from Debian's python (gfal2's bindings are built for it), the pinned
# requirements. Idempotent and quick when everything is already there.
#   scripts/bootstrap.sh run    what `make run` needs
#   scripts/bootstrap.sh test   plus what the tests need (chromium, node_exporter, fio, ...)
#   scripts/bootstrap.sh sso    what `make run` needs, plus the test OpenID provider (make sso-provider)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-run}"

packages=(python3 python3-venv python3-gfal2 python3-xrootd gfal2 gfal2-plugin-file gfal2-plugin-http
          gfal2-plugin-xrootd gfal2-plugin-gridftp gfal2-plugin-mock xrootd-server xrootd-client openssl util-linux
          xrootd-scitokens-plugins  # doors that check storage tokens (devsite.xrootd_server.TokenTrust)
          postgresql redis-server)  # the site's own servers when DATABASE_URL / CELERY_BROKER_URL are unset (devsite.launch)
if [ "$purpose" = test ]; then
    packages+=(docker-compose)  # validates docker-compose.yml (no engine needed)
    packages+=(globus-gridftp-server-progs globus-proxy-utils)  # real gsiftp:// doors with GSI, and the proxy they accept
    packages+=(iproute2 socat)  # client-pool tests: each client in a network namespace on a bridge, database and broker relayed to it
    packages+=(libfaketime)  # a real worker whose clock is an hour off (tests/campaigns/runs/test_clock_skew.py)
    packages+=(procps fio prometheus-node-exporter chromium strace poppler-utils)  # poppler-utils: the report test renders PDF pages to PNG; strace: a test checks children are vforked; host tests, node_exporter scrapes; browser tests (Playwright drives Debian's chromium)
fi

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "Installing Debian packages: ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

requirements=requirements.txt
[ "$purpose" = test ] && requirements=requirements-dev.txt
stamp=".venv/.installed-${purpose/sso/run}"
if [ ! -x .venv/bin/python ]; then
    # Debian's interpreter, not the first python3 on PATH: python3-gfal2 is built for it.
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
if [ ! -f "$stamp" ] || [ "$requirements" -nt "$stamp" ] || [ requirements.txt -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -r "$requirements"
    touch "$stamp"
fi
.venv/bin/python -c "import gfal2" || { echo "gfal2's Python bindings do not import in .venv" >&2; exit 1; }

# The tests' OpenID provider (panva's oidc-provider), from the npm registry at the locked versions.
# It needs node >= 20 with its npm (NodeSource's nodejs package bundles npm; Debian 12's nodejs is 18).
if [ "$purpose" = test ] || [ "$purpose" = sso ]; then
    if ! command -v npm >/dev/null || ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
        echo "The test OpenID provider (single sign-on tests, make sso-provider) needs node >= 20 and npm (e.g. NodeSource's nodejs package)" >&2
        exit 1
    fi
    oidc=tests/support/oidc
    if [ ! -d "$oidc/node_modules" ] || [ "$oidc/package-lock.json" -nt "$oidc/node_modules" ]; then
        (cd "$oidc" && npm ci --no-audit --no-fund --silent)
        touch "$oidc/node_modules"
    fi
fi
