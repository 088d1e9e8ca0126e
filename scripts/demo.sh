#!/usr/bin/env bash
# demo.sh BUILD-DIR: the main job, end to end, in about a minute on two cores:
#   1. the networks of the Poseidon papers, as the tool reads them;
#   2. a simulated scaling experiment — VGG19-22K on 1-32 Titan X nodes at 40 and 10 GbE,
#      parameter server versus Poseidon's hybrid versus ring all-reduce — and its plot;
#   3. a short real distributed training: 4 worker processes over ZeroMQ training the
#      LeNet-style CNN on Fashion-MNIST with the same planner (hybrid: PS for the convolutions,
#      SFB for the FC layers where cheaper), and its training curve;
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
"$bin" train experiments/lenet-4workers.exp --report-every 50 \
    --csv out/demo/train-lenet-4workers.csv --job-out out/demo/lenet-4workers-ran.exp \
    --trace out/demo/trace-real
rm -f out/demo/trace-real-rank*
"$bin" report train out/demo/train-lenet-4workers.csv --out out/reports/train-lenet-4workers 2>/dev/null
echo "  rows: out/demo/train-lenet-4workers.csv; plot: out/reports/train-lenet-4workers.png"
predicted=$("$bin" sim out/demo/lenet-4workers-ran.exp --csv - --trace out/demo/trace-sim 2>/dev/null |
    awk -F, 'NR==1 {for (i = 1; i <= NF; i++) col[$i] = i; next} {print $col["images_per_s"]}')
measured=$(awk -F, 'NR==1 {for (i = 1; i <= NF; i++) col[$i] = i; next} {v = $col["images_per_s"]} END {print v}' \
    out/demo/train-lenet-4workers.csv)
echo "  the job it ran, with the link it planned on: out/demo/lenet-4workers-ran.exp"
echo "  poseidon sim on it: ${predicted} images/s predicted for one worker per core;" \
     "measured ${measured} images/s (4 workers on $(nproc) cores)"
echo "  the full run (>= 89% test accuracy):"
echo "    $bin train experiments/lenet-4workers.exp --set epochs=3 --set limit=0"

echo
echo "== 4. the study as one page (poseidon report html)"
cp "$csv" out/demo/
cat >out/demo/commands.txt <<EOF
scripts/experiments_sim.sh $build vgg19-22k        # the scaling CSV (copied here)
$bin train experiments/lenet-4workers.exp --report-every 50 --csv out/demo/train-lenet-4workers.csv --job-out out/demo/lenet-4workers-ran.exp --trace out/demo/trace-real
$bin sim out/demo/lenet-4workers-ran.exp --csv - --trace out/demo/trace-sim
$bin report html out/demo
EOF
"$bin" report html out/demo 2>/dev/null | sed 's/^/  /'
echo "  open it in a browser: $(pwd)/out/demo/report.html"
