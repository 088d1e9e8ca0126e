#!/usr/bin/env bash
# experiments/emucluster.sh: a 3-host emulated cluster runs the PS/all-reduce check over
# the namespace addresses; the tbf rate limit holds (goodput on a 200 Mbit/s link between
# 80% and 105% of it); and nothing of a run is left behind - after success, after a failing
# command, and after Ctrl-C - bridge netfilter settings included: off while a run is up,
# as before once the last run is gone (checked when no other run holds them).
# Exit 77 (skip) when not root or without network namespaces.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
require_netns
# This test's runs only (other emulated clusters may come and go meanwhile).
export EMU_ID=$(printf 'e%04x' $(( $$ & 0xffff )))
leftovers() { echo $(( $(ip -o link show | grep -c " pbr$EMU_ID\| pv$EMU_ID") + $(ip netns list | grep -c "^pns$EMU_ID-") )); }
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
row=$(timeout 120 experiments/emucluster.sh -n 2 -r 200mbit -- "$build/poseidon" comm-test --mode bench --keys "$keys-2" \
      --block-bytes 1048576 --total-bytes 8388608 --iters 2 2>&1 | sed -n 's/^\[rank 0\] \([0-9][0-9,.]*\)$/\1/p')
[ -n "$row" ] || fail "no benchmark row"
echo "$row" | awk -F, '{ e = $5 / 25e6; printf "200 Mbit/s link: goodput %.1f MB/s (%.2f)\n", $5/1e6, e; exit !(e < 1.05) }' \
    || fail "rate limit not as set (faster than the link): $row"
slow=""  # judged last, so that a busy host still runs the checks below
echo "$row" | awk -F, '{ exit !($5 / 25e6 > 0.8) }' || slow="goodput below 0.8 of the link: $row"

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
