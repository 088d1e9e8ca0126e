#!/usr/bin/env bash
# --max-restarts: a local job (LeNet, hybrid: PS and SFB, dropout) whose rank 1 is killed with
# SIGKILL after the checkpoint of iteration 40, and whose rank 0 is killed after the restarted
# run's checkpoint of 120, restarts twice from its newest complete checkpoint, says each time
# why, exits 0, and ends with the parameters and the rows of the job that never failed, bit
# for bit. A third failure would be beyond --max-restarts 2: the job then exits non-zero.
# Then the same under a launcher (ranks started by hand with RANK/WORLD_SIZE, as mpirun or
# srun would): a rank killed, the job aborts; the same command started again resumes from
# the checkpoint, records the restart, and ends as the straight run.
set -u
build=${1:-build}
. tests/integration/lib/common.bash
d=$(mktemp -d)
pid=
pids=()
trap '[ -n "$pid" ] && kill -KILL -- -"$pid" 2>/dev/null; for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$d"' EXIT
job=("$build/poseidon" train --model models/lenet.net --scheme hybrid --data synthetic
     --synthetic-n 2048 --batch 8 --lr 0.02 --no-eval --no-probe --insecure --job-out none
     --report-every 10 --iterations 200)

"${job[@]}" --workers 2 --params-out "$d/straight" --csv "$d/straight.csv" >"$d/straight.log" 2>&1 ||
    fail "straight run: $(tail -3 "$d/straight.log")"

# The pid of rank $1 of the latest start (its log line "rank R of 2 (...), pid P").
rank_pid() {
    grep -o "rank $1 of 2 ([^)]*), pid [0-9]*" "$d/restarted.log" | tail -1 | sed 's/.*pid //'
}

# Waits for $1 to exist, then kills rank $2 with SIGKILL.
kill_after() {
    for _ in $(seq 2400); do
        [ -e "$1" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.025
    done
    [ -e "$1" ] || fail "no $1: $(tail -3 "$d/restarted.log")"
    local r
    r=$(rank_pid "$2")
    [ -n "$r" ] || fail "no rank $2 to kill"
    kill -KILL "$r"
}

setsid "${job[@]}" --workers 2 --max-restarts 2 --checkpoint-dir "$d/ck" --checkpoint-every 20 \
    --params-out "$d/restarted" --csv "$d/restarted.csv" >"$d/restarted.log" 2>&1 &
pid=$!
kill_after "$d/ck/iter-40/COMPLETE" 1
for _ in $(seq 2400); do
    grep -q "restart 1 of 2" "$d/restarted.log" && break
    sleep 0.025
done
kill_after "$d/ck/iter-120/COMPLETE" 0
wait "$pid"
rc=$?
pid=
[ "$rc" -eq 0 ] || fail "the restarted job exited $rc: $(tail -5 "$d/restarted.log")"
grep -q "restart 1 of 2: worker 1 killed by signal 9 (Killed); the ranks' account: .*rank 1.*; resuming from $d/ck/iter-[0-9]*" "$d/restarted.log" ||
    fail "no line for the first restart: $(grep -m3 restart "$d/restarted.log")"
grep -q "restart 2 of 2: worker 0 killed by signal 9 (Killed); the ranks' account: .*rank 0.*; resuming from $d/ck/iter-[0-9]*" "$d/restarted.log" ||
    fail "no line for the second restart: $(grep -m3 restart "$d/restarted.log")"
for r in 0 1; do
    cmp -s "$d/straight.$r" "$d/restarted.$r" || fail "rank $r: parameters differ from the straight run's"
done
diff <(cut -d, -f1-5 "$d/straight.csv") <(cut -d, -f1-5 "$d/restarted.csv") >/dev/null ||
    fail "the restarted CSV is not the straight run's table"
grep -o "restart [12] of 2: .*" "$d/restarted.log" | sed 's/^/  /'
echo "ok: killed rank 1 and rank 0, restarted twice ($(grep -o 'resuming from [^ ]*' "$d/restarted.log" | tr '\n' ' ')), parameters bit-identical"

# under a launcher: two ranks started by hand, the launcher's loop restarts them
port=$(free_port) || fail "no free port"
launched() { # starts both ranks with the same command line; sets pids
    pids=()
    for r in 0 1; do
        RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${job[@]}" --max-restarts 1 \
            --checkpoint-dir "$d/lck" --checkpoint-every 20 --params-out "$d/launched" \
            --timeout-ms 20000 >"$d/launched-$1-$r.log" 2>&1 &
        pids+=($!)
    done
}
launched 0
for _ in $(seq 2400); do
    [ -e "$d/lck/iter-40/COMPLETE" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.025
done
[ -e "$d/lck/iter-40/COMPLETE" ] || fail "launched: no checkpoint of 40: $(tail -3 "$d/launched-0-0.log")"
{ kill -KILL "${pids[1]}"; wait "${pids[1]}"; } 2>/dev/null
wait "${pids[0]}"
rc=$?
[ "$rc" -ne 0 ] || fail "launched: rank 0 exited 0 after rank 1 was killed"
launched 1
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
pids=()
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] || fail "launched restart: exits $rc0 $rc1: $(tail -3 "$d/launched-1-0.log")"
grep -q "restart 1 of 1: the run before ended: .*(rank 0).*job aborted: .*(rank 1) .*; resuming from $d/lck/iter-" "$d/launched-1-0.log" ||
    fail "launched: no restart line: $(grep -m2 -i 'restart\|resum' "$d/launched-1-0.log")"
grep -q "^restart 1 at .*: resumed from iteration [0-9]* after: .*(rank 1) closed its connection" "$d/lck/restarts" || fail "launched: no record in lck/restarts"
for r in 0 1; do
    cmp -s "$d/straight.$r" "$d/launched.$r" || fail "launched: rank $r: parameters differ from the straight run's"
done
# its restarts are spent: the same command again is refused
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${job[@]}" --max-restarts 1 \
    --checkpoint-dir "$d/lck" --checkpoint-every 20 >"$d/spent.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "max_restarts (1) are spent" "$d/spent.log" ||
    fail "a third start was not refused ($rc): $(tail -2 "$d/spent.log")"
grep -o "restart 1 of 1: .*" "$d/launched-1-0.log" | sed 's/^/  /'
echo "ok: under a launcher, a rank killed, the ranks started again resumed from $(grep -o 'resumed from iteration [0-9]*' "$d/lck/restarts"), parameters bit-identical"
