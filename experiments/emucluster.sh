#!/usr/bin/env bash
# emucluster.sh: an emulated cluster on one machine. Creates N network namespaces, each
# with one veth pair to a private bridge, a tc tbf rate limit on both directions of each
# host's link (so each host has a NIC of RATE in and out) and an optional netem delay,
# runs one command per namespace with the launcher environment set, and removes everything
# afterwards - also on failure, Ctrl-C or TERM.
#
#   experiments/emucluster.sh -n N [-r RATE] [-q QUEUE] [-d DELAY] [-k K] [-s S]
#                             [-R PER_RACK -U UPLINK] [-p PORT] [-l LOGDIR] -- CMD [ARGS...]
#     RATE   tc rate, e.g. 1gbit, 500mbit (default 1gbit); "none" for no limit
#     QUEUE  how a link queues what waits for it: "fair" (default) or "fifo" (see below)
#     DELAY  one-way netem delay per host, e.g. 1ms (default: none)
#     K      time dilation: the cluster stands for one K times faster, so every link runs at
#            RATE / K (and UPLINK / K) with DELAY x K (default 1); the command is told K in
#            EMU_TIME_DILATION and must stretch its own clocks to match (poseidon train
#            --set time_dilation=K)
#     S      tensor scale: the command sends every tensor S times smaller, so every link
#            (and uplink) runs a further S times slower, its delay unchanged, and the tbf's
#            burst is S times smaller (default 1); the command is told S in
#            EMU_TENSOR_SCALE (poseidon train --set tensor_scale=S, compute = emulate)
#     PER_RACK, UPLINK  racks: hosts 0..PER_RACK-1 share rack 0's bridge, and so on (N a
#            multiple of PER_RACK); each rack bridge reaches one core bridge through a link of
#            UPLINK each way (a tc rate, e.g. 2gbit: PER_RACK x RATE / oversubscription),
#            queued as the hosts' links are
#   Each command gets RANK, WORLD_SIZE, LOCAL_RANK=0, MASTER_ADDR (host 0's address),
#   MASTER_PORT, EMU_ADDR (its own address), EMU_TIME_DILATION (K) and EMU_TENSOR_SCALE
#   (S). Its output goes to LOGDIR/rank<i>.log (default: a temporary folder) and is
#   printed, prefixed, at the end.
#   Exit status: 0 if every command exited 0, else the first non-zero status.
#   A node of D devices is still one namespace and one command: poseidon train runs one rank
#   per node and a thread per device (--devices-per-node D, or the experiment's
#   cluster.devices_per_node: validate.sh --devices-per-node), the D sharing the node's NIC.
#
# Names carry a per-run id (pid + random), so two runs never collide; addresses are from
# 10.<a>.<b>.0/24, used only inside the namespaces of this run (the bridge has no address,
# so the host's routing table is not touched). Needs root and iproute2.
#
# Queues: each direction of a host's link is a tbf at RATE (the wire). Under it, "fair"
# serves the TCP connections waiting for the link in turn, one packet each (HTB classes
# with a 1514-byte quantum), packets under 128 bytes (ACKs, requests) first - what a host's
# fq_codel does and what the simulator's max-min sharing of a NIC among flows assumes. A
# connection's class is picked by its peer host and then by a hash of its own port (16 per
# peer, peer_queue): each host's connections and listeners take their ports from a range of
# their own (512 from 32768 + 512 x host), so on host i's sending side the destination port
# names the peer and on its receiving side the source port does. A class picked by a hash
# of both ports alone, as the racks' uplinks still do (fair_queue), put a shard's 31
# connections into 16 classes at 32 hosts, since the shard's side of them shares one port:
# a connection alone in its class ran at twice the rate of two that shared one, the hosts
# whose pulls came that way ran ahead every iteration, and a 32-node GoogLeNet ps+wfbp run
# measured 0.231 s against 0.257 s predicted; with a class per peer, 0.257 s. "fifo" is one
# queue: the runtime's many connections (one per layer and syncer) park up to ~4 MB in
# it, and a small late transfer (the first layers' syncs that the next forward pass waits
# for) waits behind all of it, where max-min sharing would finish it at once (GoogLeNet,
# 2 nodes, ps+wfbp, 1 Gbit/s, 3 runs each: 0.348-0.367 s per iteration with fifo,
# 0.321-0.348 with fair, 0.342 predicted; reports/README.md has the whole grid: fair is
# closer at 2 nodes, not at 4). The fair classes hold 10,000 packets each, so that they do
# not drop (the simulator has no losses; the fifo's 100 ms dropped packets in 4-node runs
# at 0.5 Gbit/s). This kernel has no fq_codel or sfq (only htb and tbf), hence the classes.
#
# Bridge netfilter: with br_netfilter loaded, every frame crossing the bridge goes through
# the host's iptables/ip6tables/arptables hooks (br_nf_pre_routing, br_nf_post_routing),
# which showed in CPU profiles of 8-node runs. While a run is up, those of
# /proc/sys/net/bridge/bridge-nf-call-{iptables,ip6tables,arptables} that are 1 are set to
# 0 (host-wide). The settings are shared by every run, so each run registers itself under
# $EMU_NF_DIR (default /run/poseidon-emucluster) while holding a flock: the first run saves
# the values it changed, the last one to leave (holders whose process is gone do not count)
# puts them back. EMU_BRIDGE_NF=keep leaves the settings alone.
set -u
n=0 rate=1gbit queue=fair delay="" port=29500 logdir="" dilation=1 scale=1 per_rack=0 uplink=""
usage() { sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "n:r:q:d:k:s:R:U:p:l:h" o; do
    case $o in
    n) n=$OPTARG ;; r) rate=$OPTARG ;; q) queue=$OPTARG ;; d) delay=$OPTARG ;; p) port=$OPTARG ;;
    l) logdir=$OPTARG ;; k) dilation=$OPTARG ;; s) scale=$OPTARG ;; R) per_rack=$OPTARG ;; U) uplink=$OPTARG ;;
    h) usage; exit 0 ;; *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ "$n" -ge 1 ] 2>/dev/null && [ "$n" -le 64 ] || { echo "emucluster: -n must be 1..64" >&2; exit 2; }
[ $# -ge 1 ] || { echo "emucluster: no command (after --)" >&2; exit 2; }
case $queue in fair|fifo) ;; *) echo "emucluster: -q must be fair or fifo" >&2; exit 2 ;; esac
[[ "$dilation" =~ ^[1-9][0-9]{0,3}$ ]] || { echo "emucluster: -k must be an integer 1..9999" >&2; exit 2; }
[[ "$scale" =~ ^[1-9][0-9]{0,3}$ ]] && [ "$scale" -le 4096 ] || { echo "emucluster: -s must be an integer 1..4096" >&2; exit 2; }
# dilate_rate RATE: RATE / (K x S) as a tc rate in bit/s (tc's units; a bare number is bit/s)
dilate_rate() {
    local v u m
    [[ "$1" =~ ^([0-9]+([.][0-9]+)?)(bit|kbit|mbit|gbit|tbit)?$ ]] ||
        { echo "emucluster: a rate is a number with bit, kbit, mbit, gbit or tbit, got '$1'" >&2; return 1; }
    v=${BASH_REMATCH[1]} u=${BASH_REMATCH[3]:-bit}
    case $u in bit) m=1 ;; kbit) m=1e3 ;; mbit) m=1e6 ;; gbit) m=1e9 ;; tbit) m=1e12 ;; esac
    awk -v v="$v" -v m="$m" -v k="$((dilation * scale))" 'BEGIN { r = v * m / k; if (r < 8) exit 1; printf "%.0fbit\n", r }' ||
        { echo "emucluster: $1 / $((dilation * scale)) is below 8 bit/s" >&2; return 1; }
}
# dilate_delay DELAY: DELAY x K in microseconds
dilate_delay() {
    local v u m
    [[ "$1" =~ ^([0-9]+([.][0-9]+)?)(us|ms|s)$ ]] ||
        { echo "emucluster: a delay is a number with us, ms or s, got '$1'" >&2; return 1; }
    v=${BASH_REMATCH[1]} u=${BASH_REMATCH[3]}
    case $u in us) m=1 ;; ms) m=1000 ;; s) m=1000000 ;; esac
    awk -v v="$v" -v m="$m" -v k="$dilation" 'BEGIN { printf "%.0fus\n", v * m * k }'
}
[ "$rate" = none ] || rate=$(dilate_rate "$rate") || exit 2
[ -z "$delay" ] || delay=$(dilate_delay "$delay") || exit 2
if [ "$per_rack" != 0 ]; then
    [[ "$per_rack" =~ ^[1-9][0-9]*$ ]] && [ $((n % per_rack)) -eq 0 ] ||
        { echo "emucluster: -R must be a positive divisor of -n ($n), got '$per_rack'" >&2; exit 2; }
    [ -n "$uplink" ] || { echo "emucluster: -R needs -U, the racks' uplink rate" >&2; exit 2; }
    uplink=$(dilate_rate "$uplink") || exit 2
elif [ -n "$uplink" ]; then
    echo "emucluster: -U needs -R, the hosts per rack" >&2; exit 2
fi
racks=$(( per_rack > 0 ? n / per_rack : 0 ))
# EMU_MTU (default 1500) is the links' MTU, the fair queue's quantum following it. 9000
# (jumbo frames) hardly saved host CPU: a 16-node GoogLeNet ps+wfbp run at K = 32 and S = 8
# spent 2.09 s of CPU per iteration against 2.24 s at 1500, within run-to-run noise; the
# host's cost is per message and wake, not per packet (docs/runtime.md).
mtu=${EMU_MTU:-1500}
[[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 1280 ] && [ "$mtu" -le 65521 ] ||
    { echo "emucluster: EMU_MTU must be 1280..65521, got '$mtu'" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "emucluster: needs root (network namespaces)" >&2; exit 2; }

# EMU_ID (1-5 hex digits) names the run's objects, so a caller can find exactly its own.
if [ -n "${EMU_ID:-}" ]; then
    [[ "$EMU_ID" =~ ^[0-9a-f]{1,5}$ ]] || { echo "emucluster: EMU_ID must be 1-5 hex digits" >&2; exit 2; }
    id=$EMU_ID
else
    id=$(printf '%04x%x' $(( ($$ ^ RANDOM) & 0xffff )) $((RANDOM & 15)))
fi
a=$(( (0x$id >> 8) % 200 + 20 )) b=$(( 0x$id & 255 ))
br="pbr$id"
ns_of() { echo "pns$id-$1"; }
pids=() setup=()
nfdir=${EMU_NF_DIR:-/run/poseidon-emucluster} nf_held=0
nf_keys="bridge-nf-call-iptables bridge-nf-call-ip6tables bridge-nf-call-arptables"
# nf_live: drops the holder files of runs that are gone; prints how many remain
nf_live() {
    local f k=0
    for f in "$nfdir"/holder.*; do
        [ -e "$f" ] || continue
        if kill -0 "${f##*.}" 2>/dev/null; then k=$((k + 1)); else rm -f "$f"; fi
    done
    echo $k
}
nf_acquire() {
    [ "${EMU_BRIDGE_NF:-}" = keep ] && return 0
    [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || return 0
    mkdir -p "$nfdir" || return 0
    (
        flock 9
        if [ "$(nf_live)" = 0 ]; then
            : >"$nfdir/saved"
            for key in $nf_keys; do
                f=/proc/sys/net/bridge/$key
                [ -e "$f" ] && [ "$(cat "$f")" = 1 ] || continue
                echo 0 >"$f" && echo "$key" >>"$nfdir/saved"
            done
        fi
        : >"$nfdir/holder.$$"
    ) 9>"$nfdir/lock"
    nf_held=1
}
nf_release() {
    [ $nf_held = 1 ] || return 0
    nf_held=0
    (
        flock 9
        rm -f "$nfdir/holder.$$"
        if [ "$(nf_live)" = 0 ] && [ -f "$nfdir/saved" ]; then
            while read -r key; do echo 1 >"/proc/sys/net/bridge/$key"; done <"$nfdir/saved"
            rm -f "$nfdir/saved"
        fi
    ) 9>"$nfdir/lock"
}
cleanup() {
    trap - EXIT INT TERM
    for p in "${setup[@]}"; do wait "$p" 2>/dev/null; done   # hosts still being set up
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    # every namespace first, then what is left: the kernel tears the namespaces (and their
    # veth pairs) down together, where a host link deleted after each namespace waited for
    # that namespace's teardown alone (0.25 s each, 8 s at 32 hosts)
    for i in $(seq 0 $((n - 1))); do
        ns=$(ns_of "$i")
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    local h
    for h in $(ip -o link show 2>/dev/null | awk -F': ' -v p="pv${id}h" 'index($2, p) == 1 { sub(/@.*/, "", $2); print $2 }'); do
        ip link del "$h" 2>/dev/null
    done
    for k in $(seq 0 $((racks - 1))); do
        ip link del "pu${id}r$k" 2>/dev/null   # removes its peer on the core bridge too
        ip link del "${br}r$k" 2>/dev/null
    done
    ip link del "$br" 2>/dev/null
    nf_release
    [ -n "${tmplog:-}" ] && rm -rf "$tmplog"
}
trap cleanup EXIT
trap 'echo "emucluster: interrupted" >&2; exit 130' INT TERM

die() { echo "emucluster: $*" >&2; exit 1; }
nf_acquire
ip link add "$br" type bridge || die "cannot create bridge $br"
ip link set "$br" up
# fair_queue DEV: the `tc -batch` lines of the "fair" queue of a rack's uplink under tbf 2:
# (see Queues above), where many hosts' traffic meets: a class per connection, by a hash.
# Class 3:10: packets under 128 bytes (IPv4 total length), the coordinator's connections
# (MASTER_PORT: heartbeats and control, sparse flows that fq_codel would serve first, so they
# never share a hashed class's queue with bulk transfers; 8-node Inception-V3 runs had been
# aborted on 3 s of heartbeat silence) and whatever is not TCP; classes
# 3:100-3:1ff: TCP by (source port bits 1-4, destination port bits 1-4) - bit 0 is left
# out, as the kernel gives connecting and listening sockets ports of fixed parity. A u32
# hash reads one masked field, so a first table splits by source port and links each
# bucket to a table that splits by destination port. Offset 20: TCP ports after an IPv4
# header without options (the runtime's traffic has none).
fair_queue() {
    local d=$1 i j
    echo "qdisc add dev $d parent 2:1 handle 3: htb default 10 r2q 1000"
    echo "class add dev $d parent 3: classid 3:10 htb rate 100gbit prio 0 quantum $((mtu + 14))"
    for i in $(seq 0 255); do
        printf 'class add dev %s parent 3: classid 3:%x htb rate 100gbit prio 1 quantum %d\n' \
            "$d" $((0x100 + i)) $((mtu + 14))
    done
    echo "filter add dev $d parent 3: prio 1 protocol ip u32 match u16 0x0000 0xff80 at 2 flowid 3:10"
    echo "filter add dev $d parent 3: prio 1 protocol ip u32 match ip sport $port 0xffff flowid 3:10"
    echo "filter add dev $d parent 3: prio 1 protocol ip u32 match ip dport $port 0xffff flowid 3:10"
    echo "filter add dev $d parent 3: prio 2 handle 1: protocol ip u32 divisor 16"
    for i in $(seq 0 15); do
        printf 'filter add dev %s parent 3: prio 2 handle %x: protocol ip u32 divisor 16\n' \
            "$d" $((i + 2))
        for j in $(seq 0 15); do
            printf 'filter add dev %s parent 3: prio 2 protocol ip u32 ht %x:%x: match u8 0 0 flowid 3:%x\n' \
                "$d" $((i + 2)) $j $((0x100 + 16 * i + j))
        done
        printf 'filter add dev %s parent 3: prio 2 protocol ip u32 ht 1:%x: match u8 0 0 hashkey mask 0x0000001e at 20 link %x:\n' \
            "$d" $i $((i + 2))
    done
    echo "filter add dev $d parent 3: prio 2 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x001e0000 at 20 link 1:"
}
# peer_queue DEV SIDE: the `tc -batch` lines of the "fair" queue of a host's link under tbf
# 2: 16 classes per peer host (see Queues above). SIDE is "send" (the host's own link out:
# the peer is the destination port's host, the connection the source port) or "recv" (the
# other way round). Port bits 9-14 name a host (its range: 32768 + 512 x host; see the host
# loop), bits 1-4 tell a host's connections to one peer apart (bit 0 is left out: the kernel
# gives connecting and listening sockets ports of fixed parity).
peer_queue() {
    local d=$1 peer_mask=0x00007e00 conn_mask=0x001e0000 p k
    [ "$2" = recv ] && peer_mask=0x7e000000 conn_mask=0x0000001e
    echo "qdisc add dev $d parent 2:1 handle 3: htb default 10 r2q 1000"
    echo "class add dev $d parent 3: classid 3:10 htb rate 100gbit prio 0 quantum $((mtu + 14))"
    echo "filter add dev $d parent 3: prio 1 protocol ip u32 match u16 0x0000 0xff80 at 2 flowid 3:10"
    echo "filter add dev $d parent 3: prio 1 protocol ip u32 match ip sport $port 0xffff flowid 3:10"
    echo "filter add dev $d parent 3: prio 1 protocol ip u32 match ip dport $port 0xffff flowid 3:10"
    echo "filter add dev $d parent 3: prio 2 handle 1: protocol ip u32 divisor 64"
    for p in $(seq 0 $((n - 1))); do
        printf 'filter add dev %s parent 3: prio 2 handle %x: protocol ip u32 divisor 16\n' "$d" $((p + 2))
        for k in $(seq 0 15); do
            printf 'class add dev %s parent 3: classid 3:%x htb rate 100gbit prio 1 quantum %d\n' \
                "$d" $((0x100 + 16 * p + k)) $((mtu + 14))
            printf 'filter add dev %s parent 3: prio 2 protocol ip u32 ht %x:%x: match u8 0 0 flowid 3:%x\n' \
                "$d" $((p + 2)) $k $((0x100 + 16 * p + k))
        done
        printf 'filter add dev %s parent 3: prio 2 protocol ip u32 ht 1:%x: match u8 0 0 hashkey mask %s at 20 link %x:\n' \
            "$d" $(((32768 / 512 + p) & 63)) "$conn_mask" $((p + 2))
    done
    echo "filter add dev $d parent 3: prio 2 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask $peer_mask at 20 link 1:"
}
shape() { # shape NETNS-OR-EMPTY DEV [RATE [DELAY [SIDE]]]: RATE and DELAY default to the
    # hosts'; SIDE (send or recv) marks a host's link, which the fair queue serves by peer
    local pre=() ; [ -n "$1" ] && pre=(ip netns exec "$1")
    local parent="root" rate=${3:-$rate} delay=${4-$delay} side=${5:-} burst
    # the queue of each htb class (a pfifo) holds txqueuelen packets
    "${pre[@]}" ip link set dev "$2" txqueuelen 10000 || return 1
    if [ -n "$delay" ]; then
        "${pre[@]}" tc qdisc add dev "$2" root handle 1: netem delay "$delay" limit 100000 ||
            { echo "emucluster: netem failed (is sch_netem in this kernel?)" >&2; return 1; }
        parent="parent 1:"
    fi
    if [ "$rate" != none ]; then
        # burst: > rate/HZ (a 1 Gbit/s tbf needs >= 125 KB at HZ=1000), 256 KB up to
        # 1 Gbit/s and 2 / HZ of the rate above; the fifo holds 100 ms at the rate. With
        # tensors S times smaller the 256 KB are too (what passes at once is the same share
        # of a message), but never below two packets
        burst=$(awk -v r="${rate%bit}" -v s="$scale" -v m="$mtu" 'BEGIN { b = r / 8 / 500; f = 262144 / s; if (f < 2 * (m + 14)) f = 2 * (m + 14)
            printf "%.0f\n", (b > f ? b : f) }')
        "${pre[@]}" tc qdisc add dev "$2" $parent handle 2: tbf rate "$rate" burst "$burst" latency 100ms || return 1
        if [ "$queue" = fair ] && [ -n "$side" ]; then
            peer_queue "$2" "$side" | "${pre[@]}" tc -batch - || return 1
        elif [ "$queue" = fair ]; then
            fair_queue "$2" | "${pre[@]}" tc -batch - || return 1
        fi
    fi
}
# Racks: a bridge per rack, joined to the core bridge by a veth pair shaped at the uplink
# rate on both ends (the rack's end sends up, the core's end sends down).
for k in $(seq 0 $((racks - 1))); do
    rb="${br}r$k" up="pu${id}r$k" down="pc${id}r$k"
    ip link add "$rb" type bridge || die "cannot create bridge $rb"
    ip link set "$rb" up
    ip link add "$up" type veth peer name "$down" || die "cannot create veth $up"
    ip link set "$up" mtu "$mtu" master "$rb" up
    ip link set "$down" mtu "$mtu" master "$br" up
    shape "" "$up" "$uplink" "" || die "tc on $up failed"       # rack k's uplink
    shape "" "$down" "$uplink" "" || die "tc on $down failed"   # rack k's downlink
done
host_bridge() { if [ "$racks" -gt 0 ]; then echo "${br}r$(($1 / per_rack))"; else echo "$br"; fi; }
# host_up I: host I's namespace, link and queues; one line on stderr and 1 if a step failed
host_up() {
    local i=$1
    fail() { echo "emucluster: $*" >&2; exit 1; } # in the host's own subshell
    ns=$(ns_of "$i") h="pv${id}h$i"
    ip netns add "$ns" || fail "cannot create namespace $ns"
    ip link add "$h" type veth peer name eth0 netns "$ns" || fail "cannot create veth $h"
    ip link set "$h" mtu "$mtu" master "$(host_bridge "$i")" up
    ip -n "$ns" link set eth0 mtu "$mtu"
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.$a.$b.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    # the host's ports, which name it to the fair queue (peer_queue): 512 from 32768 + 512 i
    # (a rank binds a listening socket per layer unit: ResNet-152 takes 157 of them)
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="$((32768 + 512 * i)) $((32768 + 512 * i + 511))" ||
        fail "cannot set the port range of $ns"
    shape "$ns" eth0 "" "${delay}" send || fail "tc on $ns/eth0 failed"   # host i sending
    shape "" "$h" "" "${delay}" recv || fail "tc on $h failed"            # host i receiving
}
# the hosts EMU_SETUP_JOBS (default 8) at a time: most of a host's set-up is the kernel's
# waits (a veth pair, a bridge port, a namespace's first device), not CPU, and one after
# another they took 11-20 s at 32 hosts
jobs_max=${EMU_SETUP_JOBS:-8}
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || die "EMU_SETUP_JOBS must be a positive integer, got '$jobs_max'"
setup=()
for i in $(seq 0 $((n - 1))); do
    host_up "$i" &
    setup+=($!)
    if [ ${#setup[@]} -ge "$jobs_max" ]; then
        wait "${setup[0]}" || die "host set-up failed"
        setup=("${setup[@]:1}")
    fi
done
for p in "${setup[@]}"; do wait "$p" || die "host set-up failed"; done
if [ -z "$logdir" ]; then tmplog=$(mktemp -d); logdir=$tmplog; fi
mkdir -p "$logdir"
master="10.$a.$b.1"
for i in $(seq 0 $((n - 1))); do
    ip netns exec "$(ns_of "$i")" env RANK=$i WORLD_SIZE=$n LOCAL_RANK=0 MASTER_ADDR=$master \
        MASTER_PORT=$port EMU_ADDR="10.$a.$b.$((i + 1))" EMU_TIME_DILATION=$dilation EMU_TENSOR_SCALE=$scale "$@" >"$logdir/rank$i.log" 2>&1 &
    pids+=($!)
done
rc=0
for i in $(seq 0 $((n - 1))); do
    wait "${pids[$i]}"; r=$?
    [ $r -ne 0 ] && [ $rc -eq 0 ] && rc=$r
done
pids=()
for i in $(seq 0 $((n - 1))); do sed "s/^/[rank $i] /" "$logdir/rank$i.log"; done
exit $rc
