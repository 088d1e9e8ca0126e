#!/usr/bin/env bash
# A bf16 wire on 4 local workers, for ps, sfb+wfbp, allreduce+wfbp and hybrid: the job runs,
# every rank ends with the same parameters, bit for bit, and the merged trace's bytes of every
# exchange (PUSH, PULL, SFB, ALLREDUCE rows) are half of the same job's at fp32. Prints a
# table of the bytes per op kind (docs/precision.md).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the bytes of each exchange kind in a merged trace: "PULL 123 PUSH 456 ..."
bytes_by_op() {
    awk -F, 'NR > 1 && $3 ~ /^(PUSH|PULL|SFB|ALLREDUCE)$/ { b[$3] += $6 }
             END { for (k in b) printf "%s %d\n", k, b[k] }' "$1" | sort
}
printf '%-15s %-10s %14s %14s\n' scheme op "fp32 bytes" "bf16 bytes"
for scheme in ps sfb+wfbp allreduce+wfbp hybrid; do
    for wire in fp32 bf16; do
        timeout 300 "$build/poseidon" train --workers 4 --model models/lenet.net \
            --scheme "$scheme" --data synthetic --synthetic-n 512 --batch 8 --iterations 6 \
            --no-eval --no-probe --insecure --job-out none --kv-block-mb 0.25 \
            --set wire_precision=$wire --trace "$tmp/$scheme-$wire" \
            --params-out "$tmp/$scheme-$wire" >"$tmp/log" 2>&1 ||
            { tail -5 "$tmp/log"; fail "$scheme at a $wire wire exited non-zero"; }
        for r in 1 2 3; do
            cmp -s "$tmp/$scheme-$wire.0" "$tmp/$scheme-$wire.$r" ||
                fail "$scheme at a $wire wire: ranks 0 and $r hold different parameters"
        done
        bytes_by_op "$tmp/$scheme-$wire.csv" >"$tmp/$scheme-$wire.bytes"
    done
    [ -s "$tmp/$scheme-fp32.bytes" ] || fail "$scheme: no exchange in the trace"
    cmp -s "$tmp/$scheme-fp32.0" "$tmp/$scheme-bf16.0" &&
        fail "$scheme: the bf16 wire ended with the fp32 wire's parameters"
    join "$tmp/$scheme-fp32.bytes" "$tmp/$scheme-bf16.bytes" >"$tmp/joined"
    [ "$(wc -l <"$tmp/joined")" -eq "$(wc -l <"$tmp/$scheme-fp32.bytes")" ] ||
        fail "$scheme: the two traces have different exchanges"
    while read -r op b32 b16; do
        printf '%-15s %-10s %14d %14d\n' "$scheme" "$op" "$b32" "$b16"
        [ $((2 * b16)) -eq "$b32" ] || fail "$scheme $op: $b16 bytes at bf16, $b32 at fp32"
    done <"$tmp/joined"
done
echo "ok: every exchange halved at bf16, every rank's parameters identical"
