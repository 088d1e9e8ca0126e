#!/usr/bin/env bash
# A Slurm job array that runs one sweep across machines: task I of N simulates part I of the
# sweep's configurations (`poseidon sim --part I/N`) on every core of its node (-j, default:
# the cores Slurm gives the task), and a job that depends on the array merges the parts into
# the CSV one `poseidon sim EXP --csv` run would write (`poseidon report merge`: it refuses
# parts of different sweeps, a part missing or given twice, and a part that stopped early).
#
#   sbatch --array=1-8 experiments/slurm-sim-array.sh experiments/vgg19.exp out/vgg19 \
#          --set sweep_nodes=64,256,1024,10000
#   (then, once the array is done, or as a dependent job:)
#   sbatch --dependency=afterok:ARRAY_JOB_ID --wrap \
#          "build/poseidon report merge out/vgg19/part-*.csv -o out/vgg19/sim.csv"
#
# Every task must see the same experiment, model and cluster files and the same overrides
# (the parts carry a fingerprint of them) from a checkout built with `make`; the paths may
# differ between machines. Outside Slurm, any batch system or a shell loop does the same:
#   for i in 1 2 3 4; do build/poseidon sim EXP --part $i/4 --csv part-$i.csv; done
#SBATCH --job-name=poseidon-sim
#SBATCH --cpus-per-task=16
#SBATCH --mem=8G
#SBATCH --time=01:00:00
#SBATCH --output=slurm-%A_%a.out
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: sbatch --array=1-N $0 EXPERIMENT OUTDIR [--set KEY=VALUE]..." >&2; exit 2; }
exp=$1 outdir=$2
shift 2
: "${SLURM_ARRAY_TASK_ID:?run as a job array: sbatch --array=1-N}"
: "${SLURM_ARRAY_TASK_COUNT:?run as a job array: sbatch --array=1-N}"
i=$SLURM_ARRAY_TASK_ID n=$SLURM_ARRAY_TASK_COUNT
# arrays numbered from 0 (--array=0-7) count parts from 1 all the same
[ "${SLURM_ARRAY_TASK_MIN:-1}" = 0 ] && i=$((i + 1))
mkdir -p "$outdir"
bin=${POSEIDON:-build/poseidon}
"$bin" sim "$exp" "$@" --part "$i/$n" -j "${SLURM_CPUS_PER_TASK:-1}" --csv "$outdir/part-$i.csv"
