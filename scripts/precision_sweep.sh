#!/usr/bin/env bash
# precision_sweep.sh [BUILD-DIR] [MODEL...]: which scheme wins once gradients cross the wire
# in bf16 instead of fp32, in simulation. VGG19, ResNet-152 (batch 32 per node) and GPT-2
# (124M, batch 8 of 1024 tokens) on 8, 16 and 32 nodes at 10 and 40 GbE, every scheme (ps,
# ps+wfbp, sfb+wfbp, allreduce+wfbp, hybrid, hybrid3; GPT-2 without sfb+wfbp: factors of
# 8 x 1024 rows per layer make it 25x slower than all-reduce on 8 nodes at 10 GbE, and its
# all-to-all on 32 nodes takes minutes to simulate), wire_precision fp32 and bf16, on two
# kinds of node: the experiments' Titan X computing in fp32, and an H100 computing in bf16
# (989.4 TFLOP/s dense), whose compute no longer hides the network. Writes
# out/experiments/precision-sweep.csv (poseidon sim's columns plus node and
# wire_precision), precision-best.csv (per node, model, nodes and bandwidth: the best scheme
# and its images/s at each wire precision, what the fp32 winner makes at bf16, and whether
# the best changed: yes, or tie when the new best beats the old by under 1%), prints that
# table and plots out/reports/precision-sweep.{png,svg} (the best scheme's images/s, each
# point labelled). PRECISION_NODES chooses the kinds of node (both by default, e.g.
# PRECISION_NODES=h100-bf16; ResNet-152 on the H100 takes the longest: hybrid's choice on
# 311 layers, 5 s a configuration on 8 nodes).
set -euo pipefail
. "$(dirname "$0")/lib/sim_script.sh"
sim_script_begin precision_sweep.sh "vgg19 resnet-152 gpt2" -- "$@"
schemes=ps,ps+wfbp,sfb+wfbp,allreduce+wfbp,hybrid,hybrid3
csv=out/experiments/precision-sweep.csv
: >"$csv"
for node in ${PRECISION_NODES:-titanx-fp32 h100-bf16}; do
    dev=(); [ $node = h100-bf16 ] && dev=(--set cluster.device=h100 --set precision=bf16)
    for m in "${models[@]}"; do
        exp=experiments/$m.exp ss=$schemes
        [ "$m" = gpt2 ] && exp=experiments/seq-length.exp ss=${schemes/sfb+wfbp,/} # batch 8
        for w in fp32 bf16; do
            echo "== $node: $m, wire_precision $w" >&2
            "$bin" sim "$exp" --set "model=$PWD/models/$m.net" --set sweep_nodes=8,16,32 \
                --set sweep_gbps=10,40 --set sweep_schemes=$ss --set wire_precision=$w \
                "${dev[@]}" --csv - 2>/dev/null |
                awk -F, -v n=$node -v w=$w -v first=$([ -s "$csv" ] && echo 0 || echo 1) '
                    NR == 1 { if (first) print $0 ",node,wire_precision"; next }
                    { print $0 "," n "," w }' >>"$csv"
        done
    done
done
# the best scheme (most images/s; ties: the first listed) per node, model, nodes, bandwidth
best=out/experiments/precision-best.csv
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { k = $c["node"] "," $c["model"] "," $c["nodes"] "," $c["gbps"]; w = $c["wire_precision"]
      v = $c["images_per_s"]; val[k "," w "," $c["scheme"]] = v
      if (!(k in seen)) { seen[k] = 1; order[++n] = k }
      if (!((k "," w) in bv) || v > bv[k "," w]) { bv[k "," w] = v; bs[k "," w] = $c["scheme"] } }
    END { print "node,model,nodes,gbps,best_fp32,images_per_s_fp32,best_bf16,images_per_s_bf16," \
                "fp32_best_at_bf16,changed"
          for (i = 1; i <= n; i++) { k = order[i]; old = val[k ",bf16," bs[k ",fp32"]]
              ch = bs[k ",fp32"] == bs[k ",bf16"] ? "no" : bv[k ",bf16"] > 1.01 * old ? "yes" : "tie"
              printf "%s,%s,%s,%s,%s,%s,%s\n", k, bs[k ",fp32"], bv[k ",fp32"], bs[k ",bf16"],
                     bv[k ",bf16"], old, ch } }' "$csv" >"$best"
echo "wrote $csv, $best" >&2
printf "%-11s %-10s %5s %4s  %-15s %8s  %-15s %8s  %8s  %s\n" node model nodes gbps \
    "best fp32" "img/s" "best bf16" "img/s" "old@bf16" changed
tail -n +2 "$best" | awk -F, '{ printf "%-11s %-10s %5s %4s  %-15s %8.1f  %-15s %8.1f  %8.1f  %s\n",
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }'
if command -v gnuplot >/dev/null; then
    gnuplot -e "csv='$best'; out='out/reports/precision-sweep'; models='${models[*]}'" \
        reports/precision_sweep.gp && echo "plot: out/reports/precision-sweep.png, .svg" >&2
fi
