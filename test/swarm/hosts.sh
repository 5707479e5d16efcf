#!/usr/bin/env bash
# The swarm suite's three hosts on this machine (docs/testing.md, "Swarm suite"):
#
#   test/swarm/hosts.sh up      bridge, three network namespaces, a registry, three dockerd, one swarm
#   test/swarm/hosts.sh down    all of it removed again; safe to run twice, or after a failed `up`
#   test/swarm/hosts.sh cut N   host N's link cut (its containers run on, unreachable): a lost host
#   test/swarm/hosts.sh mend N  its link back
#
# Each host is a network namespace with one veth on the bridge SWARM_BRIDGE, at SWARM_NET.1N,
# running a Docker daemon of its own (data root, exec root, socket, pid file; started with
# `nsenter --net`: `ip netns exec` remounts /sys and dockerd then finds no devices cgroup). The
# machine itself is SWARM_NET.1 on the bridge, where Debian's `docker-registry` serves the
# images to the hosts (each daemon names it an insecure registry). The three hosts are swarm
# managers (one lost keeps the quorum), on an address pool of their own, labelled for
# ops/swarm/stack.yml. Nothing here reaches
# beyond the bridge: the namespaces have no default route.
#
# Needs root, docker.io, docker-registry, iproute2, iptables, util-linux (nsenter).
set -euo pipefail

SWARM_NET="${SWARM_NET:-10.231.44}"
SWARM_BRIDGE="${SWARM_BRIDGE:-rgswarm0}"
# Overlay networks are carved from here (Docker's default, 10.0.0.0/8, may be in use).
SWARM_POOL="${SWARM_POOL:-10.232.0.0/16}"
state=/run/realmgate-swarm
data=/var/lib/realmgate-swarm
registry="$SWARM_NET.1:5000"
hosts=(1 2 3)

log() { printf '== swarm hosts: %s\n' "$*" >&2; }
netns() { echo "rgswarm$1"; }
veth() { echo "rgswarm$1h"; }
address() { echo "$SWARM_NET.1$1"; }
socket() { echo "unix://$state/host$1/docker.sock"; }
on() {
  local host=$1
  shift
  docker -H "$(socket "$host")" "$@"
}

# Traffic between the namespaces crosses the bridge; with br_netfilter loaded it passes this
# machine's FORWARD chain, whose policy a host dockerd sets to DROP.
forward_rule=(FORWARD -i "$SWARM_BRIDGE" -o "$SWARM_BRIDGE" -j ACCEPT)

up_network() {
  log "bridge $SWARM_BRIDGE ($SWARM_NET.0/24), namespaces"
  if ip route | grep -q "^$SWARM_NET\.0/24"; then
    echo "hosts.sh: $SWARM_NET.0/24 is routed on this machine already (ip route); set SWARM_NET" >&2
    exit 1
  fi
  ip link add "$SWARM_BRIDGE" type bridge
  ip addr add "$SWARM_NET.1/24" dev "$SWARM_BRIDGE"
  ip link set "$SWARM_BRIDGE" up
  iptables -I "${forward_rule[@]}"
  for host in "${hosts[@]}"; do
    ip netns add "$(netns "$host")"
    ip link add "$(veth "$host")" type veth peer name eth0 netns "$(netns "$host")"
    ip link set "$(veth "$host")" master "$SWARM_BRIDGE" up
    ip -n "$(netns "$host")" addr add "$(address "$host")/24" dev eth0
    ip -n "$(netns "$host")" link set eth0 up
    ip -n "$(netns "$host")" link set lo up
  done
}

up_registry() {
  log "registry on $registry"
  mkdir -p "$state/registry" "$data/registry"
  cat >"$state/registry/config.yml" <<EOF
version: 0.1
log: { level: warn }
storage: { filesystem: { rootdirectory: $data/registry }, delete: { enabled: true } }
http: { addr: $registry }
EOF
  docker-registry serve "$state/registry/config.yml" >"$state/registry/log" 2>&1 &
  echo $! >"$state/registry/pid"
  for _ in $(seq 1 50); do
    curl -sf "http://$registry/v2/" >/dev/null && return
    sleep 0.2
  done
  echo "hosts.sh: the registry did not start ($state/registry/log)" >&2
  exit 1
}

up_daemons() {
  for host in "${hosts[@]}"; do
    log "dockerd on host $host ($(address "$host"))"
    mkdir -p "$state/host$host" "$data/host$host"
    nsenter --net="/run/netns/$(netns "$host")" dockerd \
      --data-root "$data/host$host" --exec-root "$state/host$host/exec" \
      --host "$(socket "$host")" --pidfile "$state/host$host/dockerd.pid" \
      --insecure-registry "$registry" --log-level warn \
      >"$state/host$host/dockerd.log" 2>&1 &
  done
  for host in "${hosts[@]}"; do
    for _ in $(seq 1 120); do
      on "$host" info >/dev/null 2>&1 && continue 2
      sleep 0.5
    done
    echo "hosts.sh: dockerd on host $host did not start ($state/host$host/dockerd.log)" >&2
    exit 1
  done
}

up_swarm() {
  log "swarm: host 1 initialises, hosts 2 and 3 join as managers"
  on 1 swarm init --advertise-addr "$(address 1)" --default-addr-pool "$SWARM_POOL" >/dev/null
  local token
  token="$(on 1 swarm join-token -q manager)"
  for host in 2 3; do
    on "$host" swarm join --advertise-addr "$(address "$host")" --token "$token" "$(address 1):2377" >/dev/null
  done
  # ops/swarm/stack.yml's labels: host 1 holds the data (and HAProxy); Keycloak's node 1 runs on
  # host 2, node 2 on host 3 (the suite names host 1 their fallback once they run there).
  local labels=("" "realmgate.data=true" "realmgate.keycloak-1=true" "realmgate.keycloak-2=true")
  for host in "${hosts[@]}"; do
    local args=(--label-add "realmgate.host=$host")
    for label in ${labels[$host]}; do args+=(--label-add "$label"); done
    on 1 node update "${args[@]}" "$(on "$host" info --format '{{.Swarm.NodeID}}')" >/dev/null
  done
  on 1 node ls
}

down() {
  log "down"
  for host in "${hosts[@]}"; do
    ip link set "$(veth "$host")" up 2>/dev/null || true
  done
  local pids=()
  for host in "${hosts[@]}"; do
    local pidfile="$state/host$host/dockerd.pid"
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      # Leaving first: its containers stop now, not when the daemon's shutdown times out.
      on "$host" swarm leave --force >/dev/null 2>&1 || true
      kill "$(cat "$pidfile")" && pids+=("$(cat "$pidfile")")
    fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || continue 2
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  # What a killed daemon left: its containerd, shims and containers, found by the data root and
  # exec root on their command line (their own pids only).
  local leftovers
  leftovers="$(pgrep -f "$state/host|$data/host" || true)"
  if [ -n "$leftovers" ]; then
    # shellcheck disable=SC2086
    kill -9 $leftovers 2>/dev/null || true
  fi
  if [ -s "$state/registry/pid" ]; then
    kill "$(cat "$state/registry/pid")" 2>/dev/null || true
  fi
  # Mounts under the data and exec roots (overlay layers, netns files, secrets), deepest first.
  { grep -E " ($data|$state)/" /proc/mounts || true; } | awk '{ print $2 }' | sort -r |
    while read -r mount; do umount -l "$mount" 2>/dev/null || true; done
  for host in "${hosts[@]}"; do
    ip netns del "$(netns "$host")" 2>/dev/null || true
    ip link del "$(veth "$host")" 2>/dev/null || true
  done
  ip link del "$SWARM_BRIDGE" 2>/dev/null || true
  while iptables -D "${forward_rule[@]}" 2>/dev/null; do :; done
  rm -rf "$state" "$data"
}

case "${1:-}" in
  up)
    down 2>/dev/null
    up_network
    up_registry
    up_daemons
    up_swarm
    ;;
  down) down ;;
  cut) ip link set "$(veth "$2")" down ;;
  mend) ip link set "$(veth "$2")" up ;;
  *)
    echo "usage: $0 up|down|cut N|mend N" >&2
    exit 2
    ;;
esac
