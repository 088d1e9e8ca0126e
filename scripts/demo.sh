#!/usr/bin/env bash
# demo.sh BUILD-DIR: the main job, end to end, in about a minute on two cores:
#   1. the networks of the Poseidon papers, as the tool reads them;
#   2. a simulated scaling experiment — VGG19-22K on 1-32 Titan X nodes at 40 and 10 GbE,
#      parameter server versus Poseidon's hybrid versus ring all-reduce — and its plot;
#   3. a short real distributed training: 4 worker processes over ZeroMQ training the
#      LeNet-style CNN on Fashion-MNIST with the same planner (hybrid: PS for the convolutions,
#      SFB for the FC layers where cheaper), and its training curve; then `poseidon sim` on
#      the job the run wrote (this CPU's per-layer times in it) predicts that same run, and
#      the measured and predicted images/s are set side by side (or, where the run kept the
#      host busy, why the prediction cannot hold there);
#   4. one HTML page of the study (poseidon report html): the speedup plot, the training curve
#      and one iteration of the simulated and the real run of the same plan, drawn together.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
bin=$build/poseidon
mkdir -p out/demo

echo "== 1. the benchmark networks (poseidon model show FILE --csv)"
printf '  %-20s %13s %18s\n' network params "fwd GFLOP/sample"
for f in models/*.net; do
    "$bin" model show "$f" --csv 2>/dev/null |
        awk -F, -v n="$(basename "$f" .net)" '$1=="total" {printf "  %-20s %13d %18.3f\n", n, $4, $5/1e9}'
done

echo
echo "== 2. simulated scaling: VGG19-22K, Titan X nodes, batch 32 per node"
scripts/experiments_sim.sh "$build" vgg19-22k
csv=out/experiments/scaling-vgg19-22k.csv
awk -F, 'NR==1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
         $col["nodes"] == 16 || $col["nodes"] == 32 {
             printf "  %2d nodes %4s GbE  %-15s speedup %6.2f  (%.1f images/s)\n",
                    $col["nodes"], $col["gbps"], $col["scheme"], $col["speedup"], $col["images_per_s"] }' "$csv"
echo "  published (POSEIDON.md §5): Poseidon 15.5x at 16 nodes on 10 GbE"
echo "  plot: out/reports/speedup-vgg19-22k.png (and .svg); data: $csv"

echo
echo "== 3. real distributed training: 4 workers, LeNet-style CNN, Fashion-MNIST (16,000 images)"
echo "   (the job: experiments/lenet-4workers.exp, the file poseidon sim reads too)"
rm -f out/demo/*.csv out/demo/*.json out/demo/*.exp out/demo/commands.txt
# A prediction of this run needs this CPU's per-layer times at the run's batch (one worker
# alone on a core): the run takes them into its job, and so into the job file it writes.
batch=16 cores=$(nproc)
profile=out/demo/lenet-profile-b$batch.csv
"$bin" profile --model models/lenet.net --batch $batch --out $profile 2>/dev/null
train_args=(experiments/lenet-4workers.exp --report-every 50 --profile $profile
            --csv out/demo/train-lenet-4workers.csv --job-out out/demo/lenet-4workers-ran.exp
            --trace out/demo/trace-real)
# how busy the host was while the run ran (/proc/stat: idle and iowait against all ticks)
cpu_ticks() { awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print $5 + $6, t}' /proc/stat; }
read -r idle0 total0 < <(cpu_ticks)
"$bin" train "${train_args[@]}"
read -r idle1 total1 < <(cpu_ticks)
busy=$(awk -v i=$((idle1 - idle0)) -v t=$((total1 - total0)) 'BEGIN {printf "%.0f", (t > 0 ? 100 * (1 - i / t) : 0)}')
rm -f out/demo/trace-real-rank*
"$bin" report train out/demo/train-lenet-4workers.csv --out out/reports/train-lenet-4workers 2>/dev/null
echo "  rows: out/demo/train-lenet-4workers.csv; plot: out/reports/train-lenet-4workers.png"
echo "  the job it ran: out/demo/lenet-4workers-ran.exp (with this CPU's profile, $profile)"
# the prediction: poseidon sim on exactly that job; the measurement: the run's images over its
# training time (evaluation left out), the report windows' rates combined
predicted=$("$bin" sim out/demo/lenet-4workers-ran.exp --csv - --trace out/demo/trace-sim 2>/dev/null |
    awk -F, 'NR==1 {for (i = 1; i <= NF; i++) col[$i] = i; next} {printf "%.1f", $col["images_per_s"]}') ||
    predicted=""
measured=$(awk -F, 'NR==1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
                    $col["images_per_s"] > 0 {n++; inv += 1 / $col["images_per_s"]}
                    END {if (n) printf "%.1f", n / inv}' out/demo/train-lenet-4workers.csv)
echo "  the full run (>= 89% test accuracy):"
echo "    $bin train experiments/lenet-4workers.exp --set epochs=3 --set limit=0"

echo
echo "== 4. the study as one page (poseidon report html)"
cp "$csv" out/demo/
cat >out/demo/commands.txt <<EOF
scripts/experiments_sim.sh $build vgg19-22k        # the scaling CSV (copied here)
$bin profile --model models/lenet.net --batch $batch --out $profile
$bin train ${train_args[*]}
$bin sim out/demo/lenet-4workers-ran.exp --csv - --trace out/demo/trace-sim
$bin report html out/demo
EOF
"$bin" report html out/demo 2>/dev/null | sed 's/^/  /'
echo "  open it in a browser: $(pwd)/out/demo/report.html"

echo
echo "== the real run against its prediction (out/demo/lenet-4workers-ran.exp)"
if [ -z "$measured" ]; then
    echo "  no comparison: the run wrote no throughput rows (out/demo/train-lenet-4workers.csv)"
elif [ -z "$predicted" ]; then
    echo "  no prediction: poseidon sim out/demo/lenet-4workers-ran.exp failed (run it to see why)"
else
    error=$(awk -v p="$predicted" -v m="$measured" 'BEGIN {printf "%+.1f", (p - m) / m * 100}')
    workers=4
    if [ "$workers" -le "$cores" ] && [ "$busy" -lt 85 ]; then
        echo "  measured $measured images/s, predicted $predicted for this same run (error $error%;" \
             "poseidon sim out/demo/lenet-4workers-ran.exp)"
    else
        # experiments/validate.sh marks such runs host-bound (docs/validation.md)
        echo "  measured $measured images/s; poseidon sim on this same run predicts $predicted"
        echo "  ($error%), which cannot hold on this host: $workers workers shared its $cores cores"
        echo "  ($busy% busy during the run, with their sync threads, ZeroMQ and any other work),"
        echo "  while the simulator gives each node a processor of its own. To check the simulator"
        echo "  on a small host, experiments/validate.sh runs the same plans with emulated compute"
        echo "  on emulated links (README, step 5)."
    fi
fi
