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
    netns_shape "$b" "$rate" ip netns exec "$ns" tc
    netns_shape "$a" "$rate" tc
  done
}

# netns_shape DEV RATE TC...: DEV sends at most RATE. Like a switch port with DSCP queues, the
# link honours the classes Runnel marks its traffic with (node_options::traffic_classes): calls,
# replies and acks (EF) first, then parameters (AF41), then unmarked traffic, then gradients
# (CS1); within a class, first come first served. An htb whose four classes may each take the
# whole rate, lent in that order. NETNS_FIFO=1: one queue for all (tbf), as a link that ignores
# the marks.
netns_shape() {
  local dev=$1 rate=$2
  shift 2
  if [[ -n ${NETNS_FIFO:-} ]]; then
    "$@" qdisc add dev "$dev" root tbf rate "$rate" burst 256kb latency 50ms
    return
  fi
  "$@" qdisc add dev "$dev" root handle 1: htb default 30
  "$@" class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" burst 256kb cburst 256kb \
    quantum 60000
  local band prio=0
  for band in 10 20 30 40; do
    "$@" class add dev "$dev" parent 1:1 classid "1:$band" htb rate 1mbit ceil "$rate" prio $prio \
      burst 256kb cburst 256kb quantum 60000
    prio=$((prio + 1))
  done
  # DSCP is the TOS byte's top six bits: EF 46, AF41 34, CS1 8.
  "$@" filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip tos 0xb8 0xfc flowid 1:10
  "$@" filter add dev "$dev" parent 1: protocol ip prio 2 u32 match ip tos 0x88 0xfc flowid 1:20
  "$@" filter add dev "$dev" parent 1: protocol ip prio 3 u32 match ip tos 0x20 0xfc flowid 1:40
}

# netns_set_rate TAG I RATE: host I's link (both ways) at RATE from now on, its classes kept (a
# straggling link, and back). TAG: the NETNS_TAG of the script that made the hosts
# (scripts/chaos changes the links of a cluster-run's hosts).
netns_set_rate() {
  local tag=$1 i=$2 rate=$3 dev
  for dev in "${tag}v${i}b" "${tag}v${i}a"; do
    local run=(tc)
    [[ $dev == *b ]] && run=(ip netns exec "${tag}h$i" tc)
    if [[ -n ${NETNS_FIFO:-} ]]; then
      "${run[@]}" qdisc change dev "$dev" root tbf rate "$rate" burst 256kb latency 50ms
    else
      "${run[@]}" class change dev "$dev" parent 1: classid 1:1 htb rate "$rate" burst 256kb \
        cburst 256kb quantum 60000
    fi
  done
}

# netns_link_stats: per host and direction, the bytes each traffic class carried so far, as
# "HOST DIRECTION CALLS PARAMETERS OTHER GRADIENTS" lines (egress: what the host sent; ingress:
# what it received). Nothing on FIFO links (one class).
netns_link_stats() {
  [[ -z ${NETNS_FIFO:-} ]] || return 0
  local i=0 ns
  for ns in "${NETNS_NAMES[@]}"; do
    local egress ingress
    egress=$(ip netns exec "$ns" tc -s class show dev "${NETNS_TAG}v${i}b")
    ingress=$(tc -s class show dev "${NETNS_TAG}v${i}a")
    for dir in egress ingress; do
      awk -v host=$i -v dir=$dir '
        /^class htb 1:(10|20|30|40) / { c = $3 }
        /^ Sent / && c != "" { bytes[c] = $2; c = "" }
        END { printf "%d %s %d %d %d %d\n", host, dir, bytes["1:10"], bytes["1:20"], bytes["1:30"], bytes["1:40"] }
      ' <<<"${!dir}"
    done
    i=$((i + 1))
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
