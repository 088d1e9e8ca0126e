#!/usr/bin/env bash
# racks_oversub.sh [BUILD-DIR] [MODEL...]: how rack oversubscription moves the PS / SFB /
# all-reduce choice, in simulation. 64 Titan X nodes at 40 GbE in racks of 8 (8 racks),
# oversubscription 1, 2, 4, 8 and 16 (a rack's uplink = 8 x 40 Gbit/s / ratio, per
# direction), for ps+wfbp, sfb+wfbp, allreduce+wfbp, hybrid (PS or SFB per layer) and
# hybrid3 (PS, SFB or all-reduce per layer); batch 32 per node. Writes
# out/experiments/racks-MODEL.csv (poseidon sim's columns plus oversubscription),
# racks-MODEL-table.csv (images/s per ratio and scheme, and the layers hybrid3 gives each
# method) and out/reports/racks-MODEL.{png,svg} (images/s against the ratio).
set -euo pipefail
. "$(dirname "$0")/lib/sim_script.sh"
sim_script_begin racks_oversub.sh "vgg19 resnet-152" -- "$@"
ratios="1 2 4 8 16"
schemes=ps+wfbp,sfb+wfbp,allreduce+wfbp,hybrid,hybrid3
for m in "${models[@]}"; do
    csv=out/experiments/racks-$m.csv
    : >"$csv"
    for x in $ratios; do
        echo "== $m: 64 nodes, 8 per rack, oversubscription $x" >&2
        "$bin" sim "experiments/$m.exp" --set sweep_nodes=64 --set sweep_gbps=40 \
            --set sweep_schemes=$schemes --set cluster.nodes_per_rack=8 \
            --set cluster.oversubscription=$x --csv - 2>/dev/null |
            awk -F, -v x=$x -v first=$([ -s "$csv" ] && echo 0 || echo 1) '
                NR == 1 { if (first) print $0 ",oversubscription"; next } { print $0 "," x }' >>"$csv"
    done
    # the plot's table: a row per ratio, images/s per scheme, then hybrid3's layers per method
    table=out/experiments/racks-$m-table.csv
    awk -F, -v ratios="$ratios" -v schemes="$schemes" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { k = $c["oversubscription"] "," $c["scheme"]; v[k] = $c["images_per_s"]
          if ($c["scheme"] == "hybrid3")
              l[$c["oversubscription"]] = $c["layers_ps"] "," $c["layers_sfb"] "," $c["layers_allreduce"] }
        END { ns = split(schemes, ss, ","); nr = split(ratios, rs, " ")
              printf "oversubscription"; for (i = 1; i <= ns; i++) printf ",%s", ss[i]
              print ",hybrid3 ps layers,hybrid3 sfb layers,hybrid3 allreduce layers"
              for (j = 1; j <= nr; j++) { printf "%s", rs[j]
                  for (i = 1; i <= ns; i++) printf ",%s", v[rs[j] "," ss[i]]
                  print "," l[rs[j]] } }' "$csv" >"$table"
    echo "wrote $csv, $table" >&2
    if command -v gnuplot >/dev/null; then
        gnuplot -e "csv='$table'; out='out/reports/racks-$m'; model='$m'" reports/racks.gp &&
            echo "plot: out/reports/racks-$m.png, .svg" >&2
    fi
done
