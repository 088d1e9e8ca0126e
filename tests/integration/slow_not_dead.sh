#!/usr/bin/env bash
# Slow is not dead: a rank stopped (SIGSTOP) for 4 s in a 2-rank job with a 30 s death
# timeout is reported as a stall by the coordinator (who waits, on what, since when), and
# after SIGCONT the job finishes normally; a rank killed for real (SIGKILL) still ends the job
# with a message naming it. The messages name the rank that went silent, rank 0 included:
# rank 0 (which hosts the coordinator) stopped for 4 s is named, and no healthy rank is
# called silent; rank 1 stopped while rank 0's waits time out (2 s) before the coordinator
# would count rank 1 dead (30 s): rank 0's last line names rank 1's silence, not only its own
# wait. Emulated compute (10 ms per iteration), so the host's load does not decide what is
# measured.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
printf 'layer,batch,fwd_ns,bwd_ns\nfc1,8,1000000,2000000\nrelu1,8,0,0\nfc2,8,1000000,2000000\nrelu2,8,0,0\nfc3,8,1000000,3000000\nloss,8,0,0\n' >"$tmp/prof.csv"

# the rank's pid, from its "rank R of W (...), pid P" line
rank_pid() { sed -n "s/.*rank $1 of 2 ([^)]*), pid \([0-9]*\).*/\1/p" "$2" | head -1; }
wait_for() { # wait_for PATTERN FILE SECONDS
    for _ in $(seq $(( $3 * 10 ))); do grep -q "$1" "$2" && return 0; sleep 0.1; done
    return 1
}
# pause_rank R SECONDS: once the job ($pid, logging to $tmp/log) has started, stops rank R
# for SECONDS, lets it go on and waits for the job's end; its exit status in rc.
pause_rank() {
    wait_for "steady\|epoch,iteration" "$tmp/log" 30 || { tail "$tmp/log"; fail "the job did not start"; }
    local p
    p=$(rank_pid "$1" "$tmp/log")
    [ -n "$p" ] || { tail "$tmp/log"; fail "no pid for rank $1"; }
    sleep 1
    kill -STOP "$p"
    sleep "$2"
    kill -CONT "$p"
    wait "$pid"; rc=$?
    pid=
}

POSEIDON_DEAD_MS=30000 POSEIDON_STALL_MS=1000 timeout 120 "$build/poseidon" train --workers 2 \
    --model models/mlp.net --compute emulate --profile "$tmp/prof.csv" --batch 8 \
    --iterations 600 --data synthetic --no-eval --scheme ps+wfbp --no-probe --job-out none \
    >"$tmp/log" 2>&1 &
pid=$!
pause_rank 1 4
[ $rc = 0 ] || { tail -15 "$tmp/log"; fail "a rank stopped for 4 s ended the job (exit $rc)"; }
grep -q "stall: .*(rank 0) has waited [0-9.]* s on .*; alive" "$tmp/log" ||
    { grep -i "stall\|abort" "$tmp/log" | head; fail "no stall report while rank 1 was stopped"; }
! grep -qi "abort" "$tmp/log" || fail "the stalled job aborted"
grep -q "stall: .*(rank 1) has sent no heartbeat for" "$tmp/log" ||
    fail "the stopped rank's silence was not reported"
grep "stall: " "$tmp/log" | sed 's/^warning: //' | head -2

# a rank that is gone is still dead: SIGKILL ends the job, naming the node
POSEIDON_DEAD_MS=3000 timeout 120 "$build/poseidon" train --workers 2 --model models/mlp.net \
    --compute emulate --profile "$tmp/prof.csv" --batch 8 --iterations 2000 --data synthetic \
    --no-eval --scheme ps+wfbp --no-probe --job-out none >"$tmp/log2" 2>&1 &
pid=$!
wait_for "epoch,iteration" "$tmp/log2" 30 || fail "the second job did not start"
p1=$(rank_pid 1 "$tmp/log2")
sleep 1
kill -9 "$p1"
wait $pid; rc=$?
pid=
[ $rc != 0 ] || fail "a killed rank did not end the job"
grep -qi "rank 1" "$tmp/log2" || { tail "$tmp/log2"; fail "the end does not name rank 1"; }
echo "ok: a stopped rank is reported as a stall and the job goes on; a killed one ends it"
job=("$build/poseidon" train --workers 2 --model models/mlp.net --compute emulate --profile
     "$tmp/prof.csv" --batch 8 --data synthetic --no-eval --scheme ps+wfbp --no-probe
     --job-out none)

# rank 0 stopped for 4 s (stall reports after 1 s of standing still)
POSEIDON_DEAD_MS=30000 POSEIDON_STALL_MS=1000 timeout 120 "${job[@]}" --iterations 600 \
    >"$tmp/log" 2>&1 &
pid=$!
pause_rank 0 4
[ $rc = 0 ] || { tail -15 "$tmp/log"; fail "rank 0 stopped for 4 s ended the job (exit $rc)"; }
grep -q "stall: .*(rank 0), which hosts the coordinator, did not run for [0-9.]* s" "$tmp/log" ||
    { grep "stall" "$tmp/log" | head; fail "no report naming rank 0's own stop"; }
! grep -q "stall: .*(rank 1) has sent no heartbeat" "$tmp/log" ||
    fail "the healthy rank 1 was called silent: $(grep -m1 'rank 1) has sent no heartbeat' "$tmp/log")"
echo "ok: $(grep -m1 -o 'stall: .*did not run for [0-9.]* s' "$tmp/log")"

# rank 1 stopped; rank 0's waits time out first
POSEIDON_DEAD_MS=30000 timeout 120 "${job[@]}" --iterations 2000 --timeout-ms 2000 \
    >"$tmp/log2" 2>&1 &
pid=$!
wait_for "epoch,iteration" "$tmp/log2" 30 || fail "the second job did not start"
p1=$(rank_pid 1 "$tmp/log2")
sleep 1
kill -STOP "$p1"
for _ in $(seq 300); do kill -0 "$(rank_pid 0 "$tmp/log2")" 2>/dev/null || break; sleep 0.1; done
kill -9 "$p1" 2>/dev/null
wait $pid; rc=$?
pid=
[ $rc != 0 ] || fail "the job with a stopped rank ended 0"
line=$(grep "^poseidon: .*(rank 0): " "$tmp/log2" | head -1)
[ -n "$line" ] || { tail "$tmp/log2"; fail "rank 0 said nothing"; }
echo "$line" | grep -q "rank 1 has sent no heartbeat for [0-9.]* s" ||
    fail "rank 0's last line does not name the silent rank 1: $line"
echo "ok: $line"

