#!/usr/bin/env bash
# published_real.sh [--quick] [--repeat R] [--out DIR] [--build DIR] [-- VALIDATE-OPTIONS]:
# the Poseidon papers' scaling figures (ATC'17: Titan X nodes, 40 GbE, batch 32 per node, weak
# scaling) run for real on emulated clusters, beside the simulator and the published points.
# VGG19-22K, Inception-V3 and ResNet-152 under `hybrid` and `ps+wfbp` on 1, 2, 4, 8, 16 and 32
# nodes, each run by experiments/validate.sh (--device-model titanx-maxwell: the emulated
# compute sleeps the simulator's Titan X times; --dilation auto: each row K times slower, K
# chosen so that the host does not set the pace; --tensor-scale auto: tensors S times smaller
# on links S times slower where 32 ranks of the full model would not fit in memory; extra
# options after -- go to validate.sh; 10 iterations, the last 6 measured, as PS runs settle
# into their pace after about 4).
# Speedup over one node, measured and simulated alike: N x t(1) / t(N), with t the time per
# iteration of the scheme's own 1-node run. Writes DIR/published_real.csv (model,scheme,nodes,
# measured_speedup,simulated_speedup,published_speedup,published_by, the published points from
# POSEIDON.md §5: Poseidon's Inception-V3 31.5x and VGG19-22K about 30x at 32 nodes;
# TensorFlow's `ps` Inception-V3 20x at 32 nodes and VGG19-22K 8x at 16, below 1x at 32 (not
# drawn on the log axis); ResNet-152 has none), DIR/published_real.png and .svg
# (reports/published_real.gp), and the table on the console.
#   --quick     Inception-V3 only, 1, 8 and 32 nodes, one run each
#   --repeat R  runs per row, the median kept (default 1)
#   --report    run nothing: the CSV, plot and table again from DIR/validate/validate.csv
# A point whose N-node or 1-node run was host-bound (validate.sh's flag: the host, not the
# emulated cluster, set its pace) says so in the CSV's host_bound column and the table, and
# is drawn hollow.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=out/published_real build=build repeat=1 quick=0 report=0 extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1; shift ;;
    --report) report=1; shift ;;
    --repeat|--out|--build)
        [ $# -ge 2 ] || { echo "published_real: $1 needs a value" >&2; exit 2; }
        case $1 in --repeat) repeat=$2 ;; --out) out=$2 ;; --build) build=$2 ;; esac
        shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -u$/{/^set -u$/!p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "published_real: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
done
models="vgg19-22k inception-v3 resnet-152" nodes="1 2 4 8 16 32"
[ $quick = 1 ] && models="inception-v3" nodes="1 8 32"
mkdir -p "$out"
t0=$(date +%s)
[ $report = 1 ] || experiments/validate.sh --models "$models" --nodes "$nodes" --gbps 40 --schemes "hybrid ps+wfbp" \
    --device-model titanx-maxwell --batch 32 --dilation auto --tensor-scale auto \
    --iterations 10 --warmup 4 \
    --repeat "$repeat" --build "$build" --out "$out/validate" "${extra[@]}" ||
    { echo "published_real: validate.sh failed" >&2; exit 1; }
csv=$out/published_real.csv
[ -s "$out/validate/validate.csv" ] || { echo "published_real: no $out/validate/validate.csv" >&2; exit 1; }
echo "model,scheme,nodes,measured_speedup,simulated_speedup,published_speedup,published_by,host_bound" >"$csv"
# validate.csv: model,nodes,gbps,scheme,predicted_s,measured_s,error,host_bound,...
awk -F, 'BEGIN {
        pub["inception-v3,hybrid,32"] = "31.5,poseidon"; pub["vgg19-22k,hybrid,32"] = "30,poseidon"
        pub["inception-v3,ps+wfbp,32"] = "20,tensorflow"; pub["vgg19-22k,ps+wfbp,16"] = "8,tensorflow"
    }
    NR > 1 && $3 == 40 { k = $1 "," $4; p[k "," $2] = $5; m[k "," $2] = $6; hb[k "," $2] = $8
                         if (!(k in seen)) { seen[k] = 1; ord[++n] = k }
                         if (!(($2 + 0) in ns)) { ns[$2 + 0] = 1; nl[++nn] = $2 + 0 } }
    END {
        for (i = 1; i <= nn; i++) for (j = i + 1; j <= nn; j++) if (nl[j] < nl[i]) { t = nl[i]; nl[i] = nl[j]; nl[j] = t }
        for (a = 1; a <= n; a++) for (i = 1; i <= nn; i++) {
            k = ord[a]; N = nl[i]; m1 = m[k ",1"]; p1 = p[k ",1"]
            if (m[k "," N] == "" || m1 == "") continue
            x = pub[k "," N]; if (x == "") x = ","
            printf "%s,%d,%.2f,%.2f,%s,%d\n", k, N, N * m1 / m[k "," N], N * p1 / p[k "," N], x,
                   hb[k "," N] == 1 || hb[k ",1"] == 1
        }
    }' "$out/validate/validate.csv" >>"$csv"
gnuplot -e "csv='$csv'; out='$out/published_real'" reports/published_real.gp ||
    echo "published_real: gnuplot failed (make deps installs gnuplot-nox)" >&2
echo "| network | scheme | nodes | measured speedup | simulated | published |"
echo "|---|---|---|---|---|---|"
awk -F, 'NR > 1 { printf "| %s | %s | %d | %.1fx%s | %.1fx | %s |\n", $1, $2, $3, $4, $8 == 1 ? " (host-bound)" : "",
                  $5, $6 == "" ? "" : $6 "x (" $7 ")" }' "$csv"
echo "published_real: $csv, $out/published_real.png; $(( ($(date +%s) - t0) / 60 )) min"
