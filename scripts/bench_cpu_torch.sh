#!/usr/bin/env bash
# bench_cpu_torch.sh BUILD-DIR: one-thread CPU training, poseidon against PyTorch.
# For LeNet, CIFAR-10 quick and AlexNet (models/*.net) at batch 64, the time per image of a
# training step (forward, backward, SGD update with momentum), one thread each
# (OPENBLAS_NUM_THREADS=1; torch.set_num_threads(1)), synthetic data:
# - poseidon: `poseidon train --data synthetic`, which runs exactly the step (nnet forward,
#   backward, solver step) over the batches; its CPU time (user + system) for 1 + S
#   iterations minus that for 1, divided by S x 64 images, so that start-up, data generation
#   and the test pass cancel out;
# - PyTorch: scripts/torch_step.py builds the same network from the .net file as torch.nn
#   modules and times S steps (after 1) in-process (time.process_time()).
# CPU time rather than wall-clock time: on a shared host a process's wall time counts the
# time it waited for a core. The two programs alternate, REPS rounds (default 5); each
# round's ratio is poseidon / PyTorch of adjacent runs, and the table gives the medians.
# Prints network | poseidon ms/img | torch ms/img | ratio and writes out/bench/cpu_torch.csv
# (network,batch,poseidon_ms_per_img,torch_ms_per_img,ratio,torch_wall_ms_per_img,reps).
# Env: REPS, NETS (default "lenet cifar10-quick alexnet"), BATCH (64).
# Needs PyTorch (Debian: apt-get install -y python3-torch).
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
reps=${REPS:-5}
nets=${NETS:-lenet cifar10-quick alexnet}
batch=${BATCH:-64}
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3 # Debian's torch lives in the system Python
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "bench_cpu_torch.sh: PyTorch is missing; install it with: apt-get install -y python3-torch" >&2
    exit 1
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p out/bench
out=out/bench/cpu_torch.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

steps_of() { case $1 in alexnet) echo 3 ;; *) echo 20 ;; esac; }

# cpu_s ITERATIONS MODEL SAMPLES: CPU seconds (user + system) of one poseidon train run
cpu_s() {
    local TIMEFORMAT='%3U %3S' t
    t=$( { time "$build/poseidon" train --model "models/$2.net" --batch "$batch" \
               --data synthetic --synthetic-n "$3" --iterations "$1" --warmup 1 \
               > /dev/null 2> "$tmp/err"; } 2>&1 ) || { cat "$tmp/err" >&2; return 1; }
    awk '{print $1 + $2}' <<< "$t"
}

# median of the numbers on stdin
median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for r in $(seq 1 "$reps"); do
    for net in $nets; do
        s=$(steps_of "$net")
        n=$((batch * (s + 1)))
        a=$(cpu_s 1 "$net" "$n")
        b=$(cpu_s $((s + 1)) "$net" "$n")
        p=$(awk -v a="$a" -v b="$b" -v s="$s" -v k="$batch" 'BEGIN {printf "%.4f", (b - a) * 1e3 / (s * k)}')
        read -r t tw < <("$py" scripts/torch_step.py "models/$net.net" "$batch" "$s" 1) || true
        [ -n "${tw:-}" ] || { echo "bench_cpu_torch.sh: scripts/torch_step.py failed on $net" >&2; exit 1; }
        echo "$net $p $t $tw" >> "$tmp/rows"
        echo "round $r $net: poseidon $p ms/img, torch $t ms/img (cpu)" >&2
    done
done

echo "network,batch,poseidon_ms_per_img,torch_ms_per_img,ratio,torch_wall_ms_per_img,reps" > "$out"
printf '%-14s %16s %14s %6s\n' network "poseidon ms/img" "torch ms/img" ratio
for net in $nets; do
    p=$(awk -v n="$net" '$1 == n {print $2}' "$tmp/rows" | median)
    t=$(awk -v n="$net" '$1 == n {print $3}' "$tmp/rows" | median)
    tw=$(awk -v n="$net" '$1 == n {print $4}' "$tmp/rows" | median)
    q=$(awk -v n="$net" '$1 == n {print $2 / $3}' "$tmp/rows" | median)
    printf '%-14s %16.3f %14.3f %6.2f\n' "$net" "$p" "$t" "$q"
    echo "$net,$batch,$p,$t,$(printf '%.3f' "$q"),$tw,$reps" >> "$out"
done
echo "(CPU time per image of a training step, one thread, medians of $reps alternating rounds; $out)"
