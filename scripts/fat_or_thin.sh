#!/usr/bin/env bash
# fat_or_thin.sh [BUILD-DIR] [MODEL...]: "one fat node or many thin ones" in simulation.
# The same 32 Titan X GPUs as 32 nodes x 1, 8 x 4 and 4 x 8 devices (PCIe 3 between a node's
# devices), at 10 and 40 GbE, for ps+wfbp, hybrid and allreduce+wfbp; batch 32 per device.
# Writes out/experiments/fat-thin-MODEL.csv (poseidon sim's columns plus devices_per_node),
# fat-thin-MODEL-table.csv (images/s per layout and series) and
# out/reports/fat-thin-MODEL.{png,svg} (images/s of the 32 GPUs per layout).
set -euo pipefail
. "$(dirname "$0")/lib/sim_script.sh"
sim_script_begin fat_or_thin.sh "vgg19 resnet-152" -- "$@"
for m in "${models[@]}"; do
    csv=out/experiments/fat-thin-$m.csv
    : >"$csv"
    for d in 1 4 8; do
        n=$((32 / d))
        echo "== $m: $n nodes x $d devices" >&2
        "$bin" sim "experiments/$m.exp" --set sweep_nodes=$n --set sweep_gbps=10,40 \
            --set sweep_schemes=ps+wfbp,hybrid,allreduce+wfbp --set cluster.devices_per_node=$d \
            --set cluster.interconnect=pcie3 --csv - 2>/dev/null |
            awk -F, -v d=$d -v first=$([ -s "$csv" ] && echo 0 || echo 1) '
                NR == 1 { if (first) print $0 ",devices_per_node"; next } { print $0 "," d }' >>"$csv"
    done
    # the plot's table: a row per layout, a column per (scheme, bandwidth), images/s
    table=out/experiments/fat-thin-$m-table.csv
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { v[$c["devices_per_node"] "," $c["scheme"] "," $c["gbps"]] = $c["images_per_s"] }
        END { print "devices_per_node,ps+wfbp 40,hybrid 40,allreduce+wfbp 40,ps+wfbp 10,hybrid 10,allreduce+wfbp 10"
              split("1 4 8", ds, " ")
              for (k = 1; k <= 3; k++) { d = ds[k]; printf "%s", d
                  split("40 10", gs, " ")
                  for (j = 1; j <= 2; j++) { n = split("ps+wfbp hybrid allreduce+wfbp", ss, " ")
                      for (i = 1; i <= n; i++) printf ",%s", v[d "," ss[i] "," gs[j]] }
                  printf "\n" } }' "$csv" >"$table"
    echo "wrote $csv, $table" >&2
    if command -v gnuplot >/dev/null; then
        gnuplot -e "csv='$table'; out='out/reports/fat-thin-$m'; model='$m'" reports/fat_thin.gp &&
            echo "plot: out/reports/fat-thin-$m.png, .svg" >&2
    fi
done
