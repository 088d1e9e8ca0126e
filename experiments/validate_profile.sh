#!/usr/bin/env bash
# validate_profile.sh POSEIDON MODEL BATCH COMPUTE_S: prints (stdout) a per-layer profile
# CSV (layer,batch,fwd_ns,bwd_ns: the form `poseidon profile` writes, which both the
# simulator's `profile =` and `poseidon train --compute emulate --profile` read) for an
# emulated device on which one forward + backward pass of MODEL at BATCH takes COMPUTE_S
# seconds.
#
# The device: every layer pays a fixed 10 us per pass (launch overhead, the order of a GPU
# kernel launch) and the rest of COMPUTE_S is shared in proportion to the layer's FLOPs
# (poseidon model show --csv), i.e. one sustained FLOP rate for every layer. It is the
# simulator's device model (core/unit_times.c) with one efficiency for all layer types and no
# memory-bound term, scaled so an iteration is short enough for a validation grid.
set -eu
[ $# -eq 4 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
poseidon=$1 model=$2 batch=$3 compute_s=$4
"$poseidon" model show "$model" --csv 2>/dev/null | awk -F, -v b="$batch" -v tgt="$compute_s" '
NR == 1 || $1 == "total" || $2 == "input" { next }
{ n++; name[n] = $1; f[n] = $5; w[n] = $6; flops += $5 + $6 }
END {
    launch = 10e-6
    rate = flops * b / (tgt - 2 * n * launch)   # FLOP/s of the emulated device
    if (n == 0 || rate <= 0) { print "validate_profile: compute time too short for " n " layers" > "/dev/stderr"; exit 1 }
    print "layer,batch,fwd_ns,bwd_ns"
    for (i = 1; i <= n; i++)
        printf "%s,%d,%.0f,%.0f\n", name[i], b, (launch + f[i] * b / rate) * 1e9, (launch + w[i] * b / rate) * 1e9
}'
