#!/usr/bin/env bash
# Installs Docker Compose v2 (the CLI plugin `docker compose`) on Debian 12, which ships only
# Compose 1.29: Debian 13's docker-compose package, which depends on libc6 (>= 2.34) only. Its
# .deb comes from the Debian mirror the machine's own apt sources name, through an apt
# configuration of its own in a temporary folder (the next release's suite, for this one
# download), so the machine's apt sources and package lists stay as they were.
#
#   ops/images/install-compose.sh     as root; does nothing when `docker compose` works
set -euo pipefail
# The version this repository is tested with (inline configs need 2.23.1 or later).
COMPOSE_DEB_VERSION=2.26.1-4
docker compose version >/dev/null 2>&1 && exit 0

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=debian-mirror.sh
. "$here/debian-mirror.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) trixie main" \
  >"$work/trixie.list"
apt_opts=(
  -o "Dir::Etc::sourcelist=$work/trixie.list" -o Dir::Etc::sourceparts=-
  -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root
)
apt-get -qq "${apt_opts[@]}" update
(cd "$work" && apt-get -qq "${apt_opts[@]}" download "docker-compose=$COMPOSE_DEB_VERSION")
dpkg -i "$work"/docker-compose_*.deb >/dev/null
docker compose version
