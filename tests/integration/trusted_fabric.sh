#!/usr/bin/env bash
# --trusted-fabric: the job's keys authenticate every data connection (PLAIN with the pair's
# password) but the data is not encrypted; the coordinator stays on CURVE. A local job (LeNet,
# hybrid: PS, SFB and the ring's neighbours all talk) ends with the parameters of the same job
# over CURVE, bit for bit, and says which transport it used; three ranks started by hand with
# key files do the same; --trusted-fabric with --insecure is refused.
set -u
build=${1:-build}
. tests/integration/lib/common.bash
d=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$d"' EXIT
job=("$build/poseidon" train --model models/lenet.net --scheme hybrid --data synthetic
     --synthetic-n 1024 --batch 8 --lr 0.02 --no-eval --no-probe --job-out none
     --report-every 10 --iterations 30)

"${job[@]}" --workers 2 --params-out "$d/curve" >"$d/curve.log" 2>&1 ||
    fail "CURVE run: $(tail -3 "$d/curve.log")"
"${job[@]}" --workers 2 --trusted-fabric --params-out "$d/fabric" >"$d/fabric.log" 2>&1 ||
    fail "trusted-fabric run: $(tail -3 "$d/fabric.log")"
grep -q "transport: the job's keys only; data unencrypted (--trusted-fabric)" "$d/fabric.log" ||
    fail "the run does not say its transport: $(grep -m1 transport: "$d/fabric.log")"
for r in 0 1; do
    cmp -s "$d/curve.$r" "$d/fabric.$r" || fail "rank $r: parameters differ from the CURVE run's"
done
echo "ok: local job, 2 ranks: parameters equal to the CURVE run's"

"$build/poseidon" keygen --ranks 3 -o "$d/keys" >/dev/null || fail "keygen"
port=$(free_port) || fail "no free port"
for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${job[@]}" --keys "$d/keys" \
        --trusted-fabric --params-out "$d/hand" >"$d/hand$r.log" 2>&1 &
    pids+=($!)
done
for i in 0 1 2; do
    timeout 120 tail --pid="${pids[$i]}" -f /dev/null || fail "rank $i hung"
    wait "${pids[$i]}" || fail "rank $i failed: $(tail -3 "$d/hand$i.log")"
done
pids=()
echo "ok: 3 ranks started by hand with key files and --trusted-fabric finished"

"${job[@]}" --workers 2 --trusted-fabric --insecure >"$d/both.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "trusted-fabric.*--insecure" "$d/both.log" ||
    fail "--trusted-fabric with --insecure was not refused ($rc): $(tail -2 "$d/both.log")"
echo "ok: --trusted-fabric with --insecure refused"
