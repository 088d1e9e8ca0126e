#!/usr/bin/env bash
# experiments/emucluster.sh: a 3-host emulated cluster runs the PS/all-reduce check over
# the namespace addresses; the tbf rate limit holds (goodput on a 200 Mbit/s link between
# 80% and 105% of it); and nothing of a run is left behind - after success, after a failing
# command, and after Ctrl-C - bridge netfilter settings included: off while a run is up,
# as before once the last run is gone (checked when no other run holds them). Time dilation
# (-k 4) divides the rate by 4, and with tensors scaled (-k 2 -s 2) by 2 x 2; racks (-R 1 -U 80mbit) put a 80 Mbit/s uplink between two
# hosts of different racks, and none between two hosts of one rack.
# Exit 77 (skip) when not root or without network namespaces.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
require_netns
# This test's runs only (other emulated clusters may come and go meanwhile).
export EMU_ID=$(printf 'e%04x' $(( $$ & 0xffff )))
leftovers() { echo $(( $(ip -o link show | grep -c " pbr$EMU_ID\| pv$EMU_ID\| pu$EMU_ID\| pc$EMU_ID") + $(ip netns list | grep -c "^pns$EMU_ID-") )); }
before=$(leftovers)
nf=/proc/sys/net/bridge/bridge-nf-call-iptables nfdir=${EMU_NF_DIR:-/run/poseidon-emucluster}
nf_others() { local f k=0; for f in "$nfdir"/holder.*; do [ -e "$f" ] && kill -0 "${f##*.}" 2>/dev/null && k=$((k + 1)); done; echo $k; }
nf_before=""
[ -e $nf ] && [ "$(nf_others)" = 0 ] && nf_before=$(cat $nf)

keydir=$(mktemp -d)
trap 'rm -rf "$keydir"' EXIT
keys=$keydir/keys
"$build/poseidon" keygen --ranks 3 -o "$keys" >/dev/null || fail "keygen"
out=$(timeout 120 experiments/emucluster.sh -n 3 -r 1gbit -- "$build/poseidon" comm-test --iters 2 --floats 100000 --keys "$keys" 2>&1) \
    || { echo "$out" | tail; fail "3-host check"; }
[ "$(echo "$out" | grep -c ': ok: ')" -eq 3 ] || fail "not every host reported ok"
if [ -e $nf ] && [ "${EMU_BRIDGE_NF:-}" != keep ]; then
    timeout 60 experiments/emucluster.sh -n 1 -- sleep 2 >/dev/null 2>&1 &
    sleep 1
    during=$(cat $nf)
    wait $!
    [ "$during" = 0 ] || fail "bridge-nf-call-iptables is '$during' during a run, expected 0"
fi
[ "$(leftovers)" -eq "$before" ] || fail "links or namespaces left after a successful run"

"$build/poseidon" keygen --ranks 2 -o "$keys-2" >/dev/null || fail "keygen"
# goodput EMUCLUSTER-ARGS...: the benchmark row of 8 MB from host 0 to host 1
goodput() {
    timeout 120 experiments/emucluster.sh -n 2 "$@" -- "$build/poseidon" comm-test --mode bench \
        --keys "$keys-2" --block-bytes 1048576 --total-bytes 8388608 --iters 2 2>&1 |
        sed -n 's/^\[rank 0\] \([0-9][0-9,.]*\)$/\1/p'
}
slow=""  # judged last, so that a busy host still runs the checks below
# judge WHAT BYTES-PER-S ROW: never faster than the link, slower than 0.8 of it noted
judge() {
    [ -n "$3" ] || fail "$1: no benchmark row"
    echo "$3" | awk -F, -v w="$1" -v l="$2" '{ e = $5 / l; printf "%s: goodput %.2f MB/s (%.2f)\n", w, $5/1e6, e; exit !(e < 1.05) }' \
        || fail "$1: rate limit not as set (faster than the link): $3"
    echo "$3" | awk -F, -v l="$2" '{ exit !($5 / l > 0.8) }' || slow="$1: goodput below 0.8 of the link: $3"
}
judge "200 Mbit/s link" 25e6 "$(goodput -r 200mbit)"
judge "200 Mbit/s link dilated 4 times" 6.25e6 "$(goodput -r 200mbit -k 4)"
judge "200 Mbit/s link dilated 2 times, tensors scaled 2 times" 6.25e6 "$(goodput -r 200mbit -k 2 -s 2)"
judge "80 Mbit/s rack uplink" 10e6 "$(goodput -r 200mbit -R 1 -U 80mbit)"
judge "one rack behind a 10 Mbit/s uplink" 25e6 "$(goodput -r 200mbit -R 2 -U 10mbit)"
[ "$(leftovers)" -eq "$before" ] || fail "links or namespaces left after the racks"
timeout 10 experiments/emucluster.sh -n 3 -R 2 -U 1gbit -- true >/dev/null 2>&1 && fail "3 hosts in racks of 2 accepted"
timeout 10 experiments/emucluster.sh -n 2 -k 0 -- true >/dev/null 2>&1 && fail "-k 0 accepted"
timeout 10 experiments/emucluster.sh -n 2 -s 0 -- true >/dev/null 2>&1 && fail "-s 0 accepted"

timeout 60 experiments/emucluster.sh -n 2 -- sh -c 'exit 7' >/dev/null 2>&1; rc=$?
[ $rc -eq 7 ] || fail "failing command: status $rc, expected 7"
[ "$(leftovers)" -eq "$before" ] || fail "links or namespaces left after a failing command"

# Ctrl-C signals the whole foreground process group: job control gives the run its own
# group (and keeps SIGINT from being ignored, as it is for plain background jobs)
set -m
experiments/emucluster.sh -n 3 -- sleep 30 >/dev/null 2>&1 &
pid=$!
set +m
sleep 1.5
kill -INT -- -$pid
for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -KILL $pid; fail "did not stop on SIGINT"; }
sleep 0.3
[ "$(leftovers)" -eq "$before" ] || fail "links or namespaces left after Ctrl-C"
if [ -n "$nf_before" ] && [ "$(nf_others)" = 0 ]; then
    [ "$(cat $nf)" = "$nf_before" ] || fail "bridge-nf-call-iptables is $(cat $nf) after the runs, was $nf_before"
fi
[ -z "$slow" ] || slow_or_busy "$slow"
echo "ok"
