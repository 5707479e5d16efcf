# shellcheck shell=bash
# debian_mirror: the Debian mirror (its base address) that the machine's own apt sources name
# for bookworm, in deb822 (*.sources) or one-line (sources.list) format. Sourced by the scripts
# beside it, so no mirror's name is written in this repository.
debian_mirror() {
  local mirror
  mirror="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
    /^URIs:/ { uri = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") { print uri; exit } }')"
  [ -n "$mirror" ] || mirror="$(cat /etc/apt/sources.list 2>/dev/null | awk '
    $1 == "deb" && / bookworm / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }')"
  if [ -z "$mirror" ]; then
    echo "no bookworm mirror in the machine's apt sources" >&2
    return 1
  fi
  echo "$mirror"
}
