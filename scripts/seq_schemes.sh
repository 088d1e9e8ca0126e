#!/usr/bin/env bash
# seq_schemes.sh: for BERT-base and GPT-2 (124M) at sequence lengths 16..1024 (512 for
# BERT) and 2..32 nodes, the scheme `hybrid` gives each layer (poseidon plan) by each rule
# (hybrid_rule: iteration, the default, and layer, Poseidon's), written to out/seq/schemes.csv
# (model,seq,nodes,layers_ps,layers_sfb,layers_allreduce,hybrid_rule); then the simulated
# speedup of each scheme on 8 nodes at a few lengths (poseidon sim; `hybrid-layer` is hybrid
# by the per-layer rule), written to out/seq/speedup.csv. Plot: gnuplot reports/seq_schemes.gp.
set -eu
cd "$(dirname "$0")/.."
bin=$PWD/build/poseidon
exp=$PWD/experiments/seq-length.exp
out=out/seq
mkdir -p "$out/models"
net_at() { # net_at MODEL SEQ: a copy of models/MODEL.net whose tokens have seq=SEQ
    local f="$out/models/$1-s$2.net"
    sed -E "s/(^tokens .*)seq=[0-9]+/\1seq=$2/" "models/$1.net" >"$f"
    echo "$PWD/$f"
}
echo "model,seq,nodes,layers_ps,layers_sfb,layers_allreduce,hybrid_rule" >"$out/schemes.csv"
for model in bert-base gpt2; do
    max=1024; [ "$model" = bert-base ] && max=512
    for seq in 16 32 64 128 256 512 1024; do
        [ "$seq" -gt "$max" ] && continue
        net=$(net_at "$model" "$seq")
        for nodes in 2 4 8 16 32; do
            for rule in iteration layer; do
                "$bin" plan "$exp" --csv --set "model=$net" --set "sweep_nodes=$nodes" \
                    --set "hybrid_rule=$rule" 2>/dev/null |
                    awk -F, -v m="$model" -v s="$seq" -v n="$nodes" -v r="$rule" '
                        $1 ~ /^[0-9]+$/ { c[$5]++ }
                        END { printf "%s,%s,%s,%d,%d,%d,%s\n", m, s, n, c["ps"], c["sfb"],
                                     c["allreduce"], r }'
            done
        done
    done
done >>"$out/schemes.csv"
cat "$out/schemes.csv"
first=1
for model in bert-base gpt2; do
    for seq in ${SEQS:-32 128 512}; do
        net=$(net_at "$model" "$seq")
        "$bin" sim "$exp" --csv - --set "model=$net" --set sweep_nodes=1,8 \
            --set sweep_schemes=ps+wfbp,sfb+wfbp,allreduce+wfbp,hybrid,hybrid3 2>/dev/null |
            awk -F, -v s="$seq" -v f="$first" 'NR == 1 && f { print "seq," $0 } NR > 1 { print s "," $0 }'
        first=0
        "$bin" sim "$exp" --csv - --set "model=$net" --set sweep_nodes=1,8 \
            --set sweep_schemes=hybrid --set hybrid_rule=layer 2>/dev/null |
            awk -F, -v s="$seq" 'BEGIN { OFS = "," } NR > 1 { $4 = "hybrid-layer"; print s, $0 }'
    done
done >"$out/speedup.csv"
cut -d, -f1-5,10 "$out/speedup.csv"
