#!/usr/bin/env bash
# Builds local stand-ins for the upstream images docker-compose.yml and the Dockerfile name, for
# machines that reach no image registry (CI). Each is made from the same software as its
# upstream image, on a Debian 12 base made by debootstrap; docs/production-topology.md says
# which part of each upstream image's contract a stand-in honours. The names are in
# ops/images/local-images.env, which CI exports so that compose uses them instead of the
# upstream defaults.
#
#   ops/images/build.sh     needs root (debootstrap), docker, debootstrap, mvn, npm
#
# Cached between runs on one machine: the debootstrap tarball and Maven's Keycloak download
# under the realmgate cache folder, and the images themselves (rebuilt from Docker's layer
# cache). From nothing it fetches everything it needs from the Debian mirror the machine's own
# apt sources name and from the package registries npm and Maven already use.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${REALMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/realmgate}"
# shellcheck source=local-images.env
. "$here/local-images.env"
# The npm release the Node stand-in carries (upstream node images ship npm beside node).
NPM_VERSION=11.19.1

log() { printf '== images: %s\n' "$*" >&2; }

# shellcheck source=debian-mirror.sh
. "$here/debian-mirror.sh"

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

build_base() {
  have_image "$BASE_IMAGE" && return
  local tarball="$cache/images/debian-bookworm-minbase.tar"
  if [ ! -s "$tarball" ]; then
    log "debootstrap bookworm (once; cached as $tarball)"
    local root
    root="$(mktemp -d)"
    mkdir -p "$cache/images"
    debootstrap --variant=minbase bookworm "$root" "$(debian_mirror)" >/dev/null
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
    rm -rf "$root"
  fi
  log "import $BASE_IMAGE"
  docker import --change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
}

# docker build with the base image as argument; $1 tag, $2 folder (Dockerfile), $3 context.
build() {
  log "build $1"
  docker build -q --build-arg "BASE=$BASE_IMAGE" -f "$2/Dockerfile" -t "$1" "$3" >/dev/null
}

build_node() {
  local ctx
  ctx="$(mktemp -d)"
  cp "$("$repo/scripts/node24.sh")/node" "$ctx/node"
  # npm in the image trusts what this machine trusts (its network may inspect TLS with a CA of
  # its own): the machine's bundle, as npm here uses it.
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/machine-ca-certificates.crt"
  (cd "$ctx" && npm pack "npm@$NPM_VERSION" --silent >/dev/null && tar -xzf "npm-$NPM_VERSION.tgz" &&
    mv package npm && rm "npm-$NPM_VERSION.tgz")
  build "$NODE_IMAGE" "$here/node" "$ctx"
  rm -rf "$ctx"
}

build_keycloak() {
  local version archive ctx
  version="$(sed -n "s/^export const KEYCLOAK_VERSION = '\(.*\)';/\1/p" "$repo/keycloak/distribution.ts")"
  [ "${KEYCLOAK_IMAGE##*:}" = "$version" ] ||
    { echo "build.sh: KEYCLOAK_IMAGE is not at $version (keycloak/distribution.ts)" >&2; exit 1; }
  archive="$cache/downloads/keycloak-quarkus-dist-$version.tar.gz"
  if [ ! -s "$archive" ]; then
    log "fetch keycloak-quarkus-dist $version through Maven"
    mvn -q -B dependency:copy "-Dartifact=org.keycloak:keycloak-quarkus-dist:$version:tar.gz" \
      "-DoutputDirectory=$cache/downloads"
  fi
  ctx="$(mktemp -d)"
  tar -xzf "$archive" -C "$ctx" && mv "$ctx/keycloak-$version" "$ctx/keycloak"
  build "$KEYCLOAK_IMAGE" "$here/keycloak" "$ctx"
  rm -rf "$ctx"
}

build_base
build_node
build_keycloak
build "$POSTGRES_IMAGE" "$here/postgres" "$here/postgres"
build "$REDIS_IMAGE" "$here/redis" "$here/redis"
build "$HAPROXY_IMAGE" "$here/haproxy" "$here/haproxy"
log "done: $BASE_IMAGE $NODE_IMAGE $KEYCLOAK_IMAGE $POSTGRES_IMAGE $REDIS_IMAGE $HAPROXY_IMAGE"
