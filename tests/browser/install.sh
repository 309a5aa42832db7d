#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (tests/browser/). Idempotent: a machine that has it already
# installs nothing. Prints the browser's path on stdout (last line) so callers can capture it.
#
# Playwright's own browser download (`playwright install`) is not used: it fetches from a CDN that a closed
# machine cannot reach, while Debian's package comes through the same apt mirror as everything else.
# Needs root, or sudo without a password prompt (`sudo -n`); CI runs as root.
set -euo pipefail

CHROMIUM="${LOSSLESS_CHROMIUM:-/usr/bin/chromium}"

if [ -x "$CHROMIUM" ]; then
  echo "$CHROMIUM"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  AS_ROOT=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  AS_ROOT=(sudo -n)
else
  echo "$CHROMIUM is missing and installing it needs root: run 'apt-get install chromium' as root" >&2
  exit 1
fi
command -v apt-get >/dev/null 2>&1 \
  || { echo "$CHROMIUM is missing and this machine has no apt-get: install Chromium and set LOSSLESS_CHROMIUM" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
install_chromium() {
  "${AS_ROOT[@]}" apt-get install -y --no-install-recommends chromium >&2
}
# A fresh machine may have empty package lists: update them only when the first try fails.
install_chromium || { "${AS_ROOT[@]}" apt-get update >&2 && install_chromium; }

[ -x "$CHROMIUM" ] || { echo "apt-get installed chromium but $CHROMIUM is not there" >&2; exit 1; }
echo "$CHROMIUM"
