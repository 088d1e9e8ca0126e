#!/usr/bin/env bash
# The emulated link as the simulator sees it (experiments/emucluster.sh): "-q fair" puts
# under each tbf the flow-fair queue (an htb class for small packets, and per peer host a
# table of 16 TCP classes hashed by the connection's port: 1 + 16 x 2 classes and 2 such
# tables on a host's sending side with 2 hosts), "-q fifo" leaves the tbf's single queue;
# and the start-up link probe of `poseidon train` reports the link's steady rate, within
# 0.90-0.98 of a 200 Mbit/s tbf (TCP over 1514-byte frames moves at most 0.956 of it; the
# tbf's 256 KB burst allowance made the probe read 0.984 when the first message counted).
# Exit 77 (skip) when not root or without network namespaces.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
require_netns
export EMU_ID=$(printf 'e%04x' $(( ($$ + 1) & 0xffff )))   # this test's namespaces only
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the sending side of host 0, seen from inside it: "<htb classes> <u32 tables of
# connections> <u32 tables of peers>", and its port range (which names it to the queue)
count() { # count QUEUE
    local cmd='[ "$RANK" = 0 ] || exit 0
        echo "$(tc class show dev eth0 | grep -c "class htb")" \
             "$(tc filter show dev eth0 parent 3: 2>/dev/null | grep -c "divisor 16")" \
             "$(tc filter show dev eth0 parent 3: 2>/dev/null | grep -c "divisor 64")" \
             "$(sysctl -n net.ipv4.ip_local_port_range | tr "\t" -)"'
    timeout 60 experiments/emucluster.sh -n 2 -q "$1" -r 200mbit -- sh -c "$cmd" 2>&1 |
        sed -n 's/^\[rank 0\] //p'
}
read -r classes tables peers range < <(count fair)
[ "${classes:-0}" -eq 33 ] || fail "-q fair: $classes htb classes on eth0, expected 33"
[ "${tables:-0}" -eq 2 ] || fail "-q fair: $tables u32 tables of connections on eth0, expected 2"
[ "${peers:-0}" -eq 1 ] || fail "-q fair: $peers u32 tables of peers on eth0, expected 1"
[ "${range:-}" = 32768-33279 ] || fail "host 0's ports: $range, expected 32768-33279"
read -r classes tables peers range < <(count fifo)
[ "${classes:-1}" -eq 0 ] || fail "-q fifo: $classes htb classes on eth0, expected none"

# the probe through the fair queue
printf 'layer,batch,fwd_ns,bwd_ns\n' >"$tmp/prof.csv"
"$build/poseidon" model show models/lenet.net --csv 2>/dev/null |
    awk -F, 'NR > 1 && $1 != "total" && $2 != "input" { print $1 ",16,100000,100000" }' \
    >>"$tmp/prof.csv"
"$build/poseidon" keygen --ranks 2 -o "$tmp/keys" >/dev/null || fail "keygen"
out=$(timeout 120 experiments/emucluster.sh -n 2 -r 200mbit -- "$build/poseidon" train --keys "$tmp/keys" \
      --model models/lenet.net --compute emulate --profile "$tmp/prof.csv" --batch 16 \
      --iterations 2 --data synthetic --synthetic-n 1024 --no-eval --scheme ps \
      --cluster experiments/clusters/emu-veth.cluster --timeout-ms 30000 2>&1) ||
    { echo "$out" | tail; fail "2-host run with the link probe"; }
mbs=$(echo "$out" | sed -n 's/.*link probe: \([0-9.]*\) MB\/s.*/\1/p' | head -1)
[ -n "$mbs" ] || { echo "$out" | tail; fail "no link probe line"; }
awk -v m="$mbs" 'BEGIN { e = m / 25; printf "probe: %.1f MB/s on a 200 Mbit/s link (%.3f)\n", m, e
                         exit !(e <= 0.98) }' ||
    fail "probe rate $mbs MB/s is above 0.98 of 25 MB/s (faster than the link allows)"
awk -v m="$mbs" 'BEGIN { exit !(m / 25 >= 0.90) }' ||
    slow_or_busy "probe rate $mbs MB/s is below 0.90 of 25 MB/s"
echo "ok"
