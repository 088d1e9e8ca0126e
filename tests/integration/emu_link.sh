#!/usr/bin/env bash
# The emulated link as the simulator sees it (experiments/emucluster.sh): "-q fair" puts
# under each tbf the flow-fair queue (an htb class for small packets and 256 hashed TCP
# classes; checked on a host's sending side), "-q fifo" leaves the tbf's single queue;
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

# the sending side of host 0, seen from inside it: "<htb classes> <u32 hash tables>"
count() { # count QUEUE
    local cmd='[ "$RANK" = 0 ] || exit 0
        echo "$(tc class show dev eth0 | grep -c "class htb")" \
             "$(tc filter show dev eth0 parent 3: 2>/dev/null | grep -c "divisor 16")"'
    timeout 60 experiments/emucluster.sh -n 2 -q "$1" -r 200mbit -- sh -c "$cmd" 2>&1 |
        sed -n 's/^\[rank 0\] //p'
}
read -r classes tables < <(count fair)
[ "${classes:-0}" -eq 257 ] || fail "-q fair: $classes htb classes on eth0, expected 257"
[ "${tables:-0}" -eq 17 ] || fail "-q fair: $tables u32 hash tables on eth0, expected 17"
read -r classes tables < <(count fifo)
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
