#!/usr/bin/env bash
# A distributed job killed with SIGKILL (launcher and ranks at once) after it completed a
# checkpoint, then resumed with --resume, ends with the parameters of the job that never
# stopped, bit for bit (LeNet, hybrid: PS and SFB, dropout). The killed job leaves only
# whole checkpoints (COMPLETE and every rank's file), the resumed one the newest two, and
# neither a .tmp.
set -u
build=${1:-build}
. tests/integration/lib/common.bash
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL -- -"$pid" 2>/dev/null; rm -rf "$d"' EXIT
job=("$build/poseidon" train --workers 2 --model models/lenet.net --scheme hybrid --data synthetic
     --synthetic-n 2048 --batch 8 --lr 0.02 --no-eval --no-probe --insecure --job-out none
     --report-every 10 --iterations 100)

"${job[@]}" --params-out "$d/straight" --csv "$d/straight.csv" >"$d/straight.log" 2>&1 ||
    fail "straight run: $(tail -3 "$d/straight.log")"

# its own process group: one signal reaches the launcher and both ranks
setsid "${job[@]}" --checkpoint-dir "$d/ck" --checkpoint-every 20 --params-out "$d/killed" \
    --csv "$d/resumed.csv" >"$d/killed.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do
    [ -e "$d/ck/iter-40/COMPLETE" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -KILL -- -"$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=
[ -e "$d/ck/iter-40/COMPLETE" ] || fail "no checkpoint of iteration 40: $(tail -3 "$d/killed.log")"
if [ -e "$d/killed.0" ]; then
    echo "note: the job ended before the kill (a fast machine); resuming its newest checkpoint"
fi
for c in "$d"/ck/iter-*; do
    [ -e "$c/COMPLETE" ] || continue
    [ -s "$c/rank-0.ckpt" ] && [ -s "$c/rank-1.ckpt" ] || fail "$c has COMPLETE but not every rank's file"
done

"${job[@]}" --resume "$d/ck" --checkpoint-every 20 --params-out "$d/resumed" \
    --csv "$d/resumed.csv" >"$d/resumed.log" 2>&1 || fail "resumed run: $(tail -3 "$d/resumed.log")"
k=$(sed -n 's/.*every rank starts at iteration \([0-9]*\).*/\1/p' "$d/resumed.log")
[ -n "$k" ] || fail "the resumed run did not say where it started"
for r in 0 1; do
    cmp -s "$d/straight.$r" "$d/resumed.$r" || fail "rank $r: parameters differ from the straight run's (resumed at $k)"
done
diff <(cut -d, -f1-5 "$d/straight.csv") <(cut -d, -f1-5 "$d/resumed.csv") >/dev/null ||
    fail "the resumed CSV is not the straight run's table"
n=$(find "$d/ck" -mindepth 1 -maxdepth 1 -name 'iter-*' | wc -l)
[ "$n" -eq 2 ] || fail "$n checkpoints left, not the newest two: $(ls "$d/ck")"
[ -z "$(find "$d/ck" -name '*.tmp')" ] || fail "a .tmp was left: $(find "$d/ck" -name '*.tmp')"
echo "ok: killed after the checkpoint of iteration 40, resumed at $k, parameters bit-identical"

# SIGTERM to the launcher only (a scheduler's preemption): it passes it on, the ranks agree
# to stop after their next checkpoint, exit 0 and leave it complete; resumed, the job ends
# as the straight run
rm -rf "$d/ck2"
"${job[@]}" --checkpoint-dir "$d/ck2" --checkpoint-every 20 --params-out "$d/termed" \
    --csv "$d/termed.csv" >"$d/termed.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do
    [ -e "$d/ck2/iter-20/COMPLETE" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"; rc=$?
pid=
k=$(sed -n 's/.*stopping after the checkpoint of iteration \([0-9]*\).*/\1/p' "$d/termed.log" | head -1)
if [ -z "$k" ]; then
    grep -q "^[0-9.]*,100," "$d/termed.log" && { echo "note: the job ended before SIGTERM (a fast machine)"; exit 0; }
    fail "SIGTERM: no stop after a checkpoint (exit $rc): $(tail -3 "$d/termed.log")"
fi
[ $rc -eq 0 ] || fail "SIGTERM: the job stopped after iteration $k's checkpoint but exited $rc"
[ -e "$d/ck2/iter-$k/COMPLETE" ] || fail "SIGTERM: iteration $k's checkpoint is not complete"
"${job[@]}" --resume "$d/ck2" --params-out "$d/termed-resumed" --csv "$d/termed.csv" \
    >"$d/termed-resumed.log" 2>&1 || fail "resumed after SIGTERM: $(tail -3 "$d/termed-resumed.log")"
for r in 0 1; do
    cmp -s "$d/straight.$r" "$d/termed-resumed.$r" || fail "rank $r: stopped by SIGTERM at $k and resumed, parameters differ"
done
diff <(cut -d, -f1-5 "$d/straight.csv") <(cut -d, -f1-5 "$d/termed.csv") >/dev/null ||
    fail "the CSV of the run stopped at $k and resumed is not the straight run's table"
echo "ok: SIGTERM to the launcher, the job stopped after the checkpoint of iteration $k (exit 0); resumed, parameters bit-identical"
