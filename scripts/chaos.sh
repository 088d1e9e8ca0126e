#!/usr/bin/env bash
# chaos.sh BUILD-DIR: does a job survive its faults? 8 ranks on an emulated cluster
# (experiments/emucluster.sh: a network namespace per rank, 1 Gbit/s links), the MLP on
# synthetic data, BSP (ps+wfbp), CURVE keys, a checkpoint every 25 of 200 iterations,
# --max-restarts 3, run under a launcher loop as a user would write it (emucluster.sh started
# again while the job fails, at most 4 times). One run undisturbed, then one run per fault of
# a schedule drawn from SEED (default 1): which rank, when (the iteration rank 0 has reported),
# how long:
#   kill      kill -9 of a rank other than 0                      -> the job restarts
#   kill0     kill -9 of rank 0 (the coordinator's process)        -> the job restarts
#   stop      SIGSTOP of a rank for 5-20 s (under the 60 s death)  -> the job goes on
#   stoplong  SIGSTOP of a rank for 65-90 s (over it)              -> aborted, restarts
#   slowlink  a rank's link at 2 Mbit/s for 10 s, both ways: a delay spike (the queues
#             under the link hold 10,000 packets a class, so the count of dropped packets is
#             reported, not caused)
#   linkdown  a rank's link down for 10 s (ip link set down)       -> the job goes on
#   diskfull  the checkpoint disk (a tmpfs) filled before a checkpoint: the job stops with a
#             line saying so; the space is freed once it has; the restart goes on
#   loss      1-5% of a rank's packets dropped at random, both ways, for 5 s (an nftables
#             rule in its namespace: this kernel has no netem; nftables from `make deps`)
# For each: whether the job finished (exit 0), how many restarts, the cause the first restart
# named (from the ranks' last lines, runtime/exec/restart.h), how many iterations were
# redone (reached before a failure, past the checkpoint the restart resumed from), and whether
# every rank's final parameters equal the undisturbed run's, bit for bit. Writes
# out/chaos/chaos.md (the table) and the logs under out/chaos/; exits 1 when a fault ended in
# a wrong model or an exit 0 with other parameters, 77 (skip) without root or namespaces.
# CHAOS_FAULTS="kill stop" runs a subset. Bounded: each attempt under `timeout 400`.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
. tests/integration/lib/common.bash
require_netns
seed=${SEED:-1}
faults=${CHAOS_FAULTS:-kill kill0 stop stoplong slowlink linkdown diskfull loss}
out=out/chaos
mkdir -p "$out"
tmp=$(mktemp -d)
filler_pid=
cleanup() {
    umount "$tmp/disk" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
RANDOM=$seed
"$build/poseidon" keygen --ranks 8 -o "$tmp/keys" >/dev/null || fail "keygen"
job=("$build/poseidon" train --keys "$tmp/keys" --model models/mlp.net --data synthetic
     --synthetic-n 4096 --batch 16 --scheme ps+wfbp --no-eval --no-probe --job-out none
     --iterations 200 --report-every 5 --checkpoint-every 25 --max-restarts 3)
id=$(printf '%x' $(( (RANDOM & 0xfff) + 0x1000 )))
ns() { echo "pns$id-$1"; }

# The job's launcher loop: emucluster.sh again while the job fails (exit 2, refused, ends
# it), at most 4 starts. run_job NAME CKDIR; sets attempts and rc.
run_job() {
    local name=$1 ck=$2 a
    rc=1 attempts=0
    for a in 0 1 2 3; do
        attempts=$((a + 1))
        EMU_ID=$id timeout 400 experiments/emucluster.sh -n 8 -r 1gbit -l "$tmp/$name/a$a" -- \
            "${job[@]}" --checkpoint-dir "$ck" --params-out "$tmp/$name/p" \
            >"$tmp/$name/a$a.out" 2>&1
        rc=$?
        [ "$rc" = 0 ] || [ "$rc" = 2 ] && break
    done
}

# The last iteration rank 0 reported in attempt a of NAME (0: none).
last_iter() { awk -F, '/^[0-9.]+,[0-9]+,/ { it = $2 } END { print it + 0 }' "$tmp/$1/a$2/rank0.log" 2>/dev/null || echo 0; }
# The iteration attempt a of NAME resumed from (0: it started over).
resumed_at() { sed -n 's/.*every rank starts at iteration \([0-9]*\).*/\1/p' "$tmp/$1/a$2/rank0.log" 2>/dev/null | head -1; }

# Waits until rank 0 of NAME's first attempt has reported iteration >= it.
wait_iter() {
    for _ in $(seq 1200); do
        [ "$(last_iter "$1" 0)" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

rank_pids() { ip netns pids "$(ns "$1")" 2>/dev/null; }

# tbf of a rank's link, both directions: rate RATE with LATENCY of queue
link_rate() {
    local r=$1 rate=$2 lat=$3 host
    host=$(ip -o link show | sed -n "s/^[0-9]*: \(pv${id}h$r\)@.*/\1/p")
    ip netns exec "$(ns "$r")" tc qdisc change dev eth0 root handle 2: tbf rate "$rate" burst 262144 latency "$lat"
    [ -n "$host" ] && tc qdisc change dev "$host" root handle 2: tbf rate "$rate" burst 262144 latency "$lat"
}

# drops PCT% of rank R's packets at random, both ways, for S seconds; prints how many
link_loss() {
    local r=$1 pct=$2 s=$3 n d
    n=$(ns "$r")
    ip netns exec "$n" nft -f - <<EOF || return 1
table inet chaos {
    chain in { type filter hook input priority 0; numgen random mod 100 < $pct counter drop; }
    chain out { type filter hook output priority 0; numgen random mod 100 < $pct counter drop; }
}
EOF
    sleep "$s"
    d=$(ip netns exec "$n" nft list table inet chaos | sed -n 's/.*packets \([0-9]*\).*/\1/p' |
        awk '{ t += $1 } END { print t + 0 }')
    ip netns exec "$n" nft delete table inet chaos
    echo "$d"
}

# inject NAME FAULT AT RANK SECONDS: the fault, once the first attempt has reached
# iteration AT; writes what it did to $tmp/NAME/fault.
inject() {
    local name=$1 f=$2 at=$3 r=$4 s=$5 d free
    wait_iter "$name" "$at" || { echo "never reached iteration $at" >"$tmp/$name/fault"; return; }
    case $f in
    kill|kill0)
        kill -KILL $(rank_pids "$r")
        echo "kill -9 of rank $r at iteration $at" ;;
    stop|stoplong)
        d=$(rank_pids "$r")
        kill -STOP $d; sleep "$s"; kill -CONT $d 2>/dev/null
        echo "SIGSTOP of rank $r for $s s at iteration $at" ;;
    slowlink)
        link_rate "$r" 2mbit 5ms
        sleep 10
        d=$(ip netns exec "$(ns "$r")" tc -s qdisc show dev eth0 | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
        link_rate "$r" 1gbit 100ms
        echo "rank $r's link at 2 Mbit/s for 10 s at iteration $at (${d:-?} packets dropped)" ;;
    linkdown)
        ip -n "$(ns "$r")" link set eth0 down; sleep 10; ip -n "$(ns "$r")" link set eth0 up
        echo "rank $r's link down for 10 s at iteration $at" ;;
    loss)
        if ! command -v nft >/dev/null; then echo "not run: no nft (make deps installs nftables)"; return; fi
        d=$(link_loss "$r" "$s" 5)
        echo "$s% of rank $r's packets dropped for 5 s at iteration $at (${d:-?} packets)" ;;
    diskfull)
        free=$(df -B1 --output=avail "$tmp/disk" | tail -1)
        fallocate -l $(( free - 8 * 1024 * 1024 )) "$tmp/disk/filler" 2>/dev/null ||
            dd if=/dev/zero of="$tmp/disk/filler" bs=1M count=$(( free / 1048576 - 8 )) 2>/dev/null
        for _ in $(seq 1200); do
            grep -q "MB free on its disk" "$tmp/$name"/a0/rank*.log 2>/dev/null && break
            sleep 0.1
        done
        rm -f "$tmp/disk/filler"
        echo "checkpoint disk filled to 8 MB free at iteration $at (a checkpoint: 30 MB); freed once the job said so" ;;
    esac >"$tmp/$name/fault"
}

# cmp of every rank's final parameters with the undisturbed run's
same_params() {
    local r
    for r in $(seq 0 7); do cmp -s "$tmp/calm/p.$r" "$tmp/$1/p.$r" || return 1; done
}

# What the first restart of fault $1's run said the run before ended with: the end of the line
# (after "job aborted: "), shortened; "-" when it did not restart.
restart_cause() {
    local line
    line=$(grep -rhom1 "restart 1 of [0-9]*: the run before ended: .*; resuming" "$tmp/$1"/a* | head -1)
    [ -n "$line" ] || { echo "-"; return; }
    line=${line%; resuming}
    line=${line#*the run before ended: }
    case $line in
    *"job aborted: "*) line=${line#*job aborted: } ;;
    *) line=$(sed 's/^node [^:]*: iteration [^:]*: //' <<<"$line") ;; # where the rank stood
    esac
    echo "${line:0:140}" | tr '|' '/'
}

t0=$(date +%s)
mkdir -p "$tmp/calm"
run_job calm "$tmp/calm/ck"
[ "$rc" = 0 ] || fail "the undisturbed run failed ($rc): $(tail -3 "$tmp/calm/a0.out")"
echo "undisturbed: $(( $(date +%s) - t0 )) s"
table="| fault | what was done (seed $seed) | finished | restarts | cause the first restart named | iterations redone | parameters = undisturbed | wall s |
|---|---|---|---|---|---|---|---|"
bad=0
for f in $faults; do
    mkdir -p "$tmp/$f"
    ck="$tmp/$f/ck"
    if [ "$f" = diskfull ]; then
        mkdir -p "$tmp/disk" && mount -t tmpfs -o size=96m tmpfs "$tmp/disk" || fail "cannot mount a tmpfs"
        ck="$tmp/disk/ck"
    fi
    # the schedule, drawn here (a subshell's RANDOM is not this one's)
    at=$(( 40 + RANDOM % 80 )) r=$(( 1 + RANDOM % 7 )) s=0
    [ "$f" = kill0 ] && r=0
    [ "$f" = stop ] && s=$(( 5 + RANDOM % 16 ))
    [ "$f" = stoplong ] && s=$(( 65 + RANDOM % 26 ))
    [ "$f" = loss ] && s=$(( 1 + RANDOM % 5 )) # the percentage
    t1=$(date +%s)
    inject "$f" "$f" "$at" "$r" "$s" &
    injector=$!
    run_job "$f" "$ck"
    wait "$injector"
    wall=$(( $(date +%s) - t1 ))
    redone=0
    for a in $(seq 1 $((attempts - 1))); do
        k=$(resumed_at "$f" "$a")
        reached=$(last_iter "$f" $((a - 1)))
        redone=$(( redone + (reached > ${k:-0} ? reached - ${k:-0} : 0) ))
    done
    if same_params "$f"; then same=yes; else same=no; fi
    [ "$rc" = 0 ] && finished=yes || finished="no (exit $rc)"
    [ "$rc" = 0 ] && [ "$same" = no ] && bad=1      # an exit 0 that hides a wrong model
    [ "$f" = diskfull ] && umount "$tmp/disk"
    table+="
| $f | $(cat "$tmp/$f/fault") | $finished | $((attempts - 1)) | $(restart_cause "$f") | $redone | $same | $wall |"
    rm -rf "${out:?}/$f" && mkdir -p "$out/$f" && cp -r "$tmp/$f"/a* "$tmp/$f/fault" "$out/$f/"
    echo "$f: finished $finished, $((attempts - 1)) restarts, $redone iterations redone, parameters equal: $same ($wall s)"
done
echo "$table" | tee "$out/chaos.md"
echo "total: $(( $(date +%s) - t0 )) s"
exit $bad
