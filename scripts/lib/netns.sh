# Simulated hosts for cluster tests and demos (sourced by bash scripts): each host is a network
# namespace with its own address, joined to the others through a bridge by a veth pair whose
# host-side end is rate-limited with tc's token bucket (tbf). Our kernel has no sch_netem, so
# no latency is added: the links are bandwidth-limited, not delayed.
#   source scripts/lib/netns.sh
#   netns_check || exit 77                # prints why when namespaces cannot be made here
#   netns_up 3 1gbit                      # hosts 0..2 at ${NETNS_ADDR[i]}
#   netns_exec 1 cmd args...              # runs in host 1
#   netns_down                            # also on EXIT via the trap netns_up sets

NETNS_ADDR=()
NETNS_NAMES=()
NETNS_TAG=rn$$

netns_check() {
  local why
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: simulated hosts need root (network namespaces, veth pairs, tc)"
    return 1
  fi
  if ! why=$(ip netns add "${NETNS_TAG}probe" 2>&1); then
    echo "SKIP: this machine cannot create network namespaces: $why"
    return 1
  fi
  ip netns del "${NETNS_TAG}probe"
  if ! command -v tc >/dev/null; then
    echo "SKIP: tc (iproute2) is missing"
    return 1
  fi
}

# netns_up N RATE: N hosts, each link limited to RATE (tc syntax: 1gbit, 100mbit, ...).
netns_up() {
  local n=$1 rate=$2 net=$((20 + $$ % 200))
  trap netns_down EXIT
  ip link add "${NETNS_TAG}br" type bridge
  ip link set "${NETNS_TAG}br" up
  for ((i = 0; i < n; ++i)); do
    local ns="${NETNS_TAG}h$i" a="${NETNS_TAG}v${i}a" b="${NETNS_TAG}v${i}b"
    ip netns add "$ns"
    NETNS_NAMES+=("$ns")
    ip link add "$a" type veth peer name "$b"
    ip link set "$b" netns "$ns"
    ip link set "$a" master "${NETNS_TAG}br"
    ip link set "$a" up
    NETNS_ADDR+=("10.$net.0.$((i + 1))")
    ip netns exec "$ns" ip addr add "10.$net.0.$((i + 1))/24" dev "$b"
    ip netns exec "$ns" ip link set "$b" up
    ip netns exec "$ns" ip link set lo up
    # Both directions of each host's link: its egress in the namespace, its ingress at the bridge.
    ip netns exec "$ns" tc qdisc add dev "$b" root tbf rate "$rate" burst 256kb latency 50ms
    tc qdisc add dev "$a" root tbf rate "$rate" burst 256kb latency 50ms
  done
}

netns_exec() {
  local i=$1
  shift
  ip netns exec "${NETNS_NAMES[$i]}" "$@"
}

netns_down() {
  local i=0
  for ns in "${NETNS_NAMES[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    # Deleting the host-side end removes the pair at once; a namespace whose last sockets are
    # still closing would otherwise keep it for a while.
    ip link del "${NETNS_TAG}v${i}a" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    i=$((i + 1))
  done
  NETNS_NAMES=()
  ip link del "${NETNS_TAG}br" 2>/dev/null || true
}
