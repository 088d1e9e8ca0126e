#!/usr/bin/env bash
# paper_grid.sh [--quick] [--estimate] [--resume] [--out DIR] [--build DIR] [-- OPTIONS]: the
# simulator checked against real runs at the papers' scale, in three parts, each run by
# experiments/validate.sh into a folder of its own under DIR (default out/paper_grid):
#   main     validate.sh --paper: GoogLeNet, Inception-V3, ResNet-152 and VGG19 on 8, 16 and
#            32 Titan X nodes at 10 and 40 GbE, ps ps+wfbp sfb+wfbp hybrid hybrid3
#            allreduce+wfbp, the median of 3 runs (--quick: validate.sh --paper-quick)
#   devices  nodes of 4 devices: GoogLeNet and Inception-V3 on 8 and 16 nodes x 4 at 10 GbE,
#            ps+wfbp hybrid allreduce+wfbp (each node one rank with 4 device threads that
#            reduce and broadcast over its interconnect)
#   racks    racks of 8 nodes behind uplinks at oversubscription 4 (a bridge per rack, each
#            behind an uplink of 8 x 10 / 4 = 20 Gbit/s to a core bridge): GoogLeNet and
#            Inception-V3 on 16 and 32 nodes at 10 GbE, ps+wfbp hybrid allreduce+wfbp
# The extra parts run --paper-quick's settings (dilation and tensor scale chosen per row,
# send_order = fair, 10 iterations of which the last 6 are measured), the median of 3 runs
# (--quick: one). Then DIR/validate.csv holds every row with its part (the columns of
# validate.sh's CSV, then part), and the median and worst |error| are printed over all rows
# and over the rows that were not host-bound.
#   --estimate  each part's --estimate, and the sum; runs nothing
#   --resume    passed to each part: rows already run are kept (validate.sh --resume)
# Options after -- go to every part's validate.sh. Needs root, as validate.sh does.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=out/paper_grid build=build quick=0 estimate=0 pass=() extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1; shift ;;
    --estimate) pass+=("$1"); estimate=1; shift ;;
    --resume) pass+=("$1"); shift ;;
    --out|--build)
        [ $# -ge 2 ] || { echo "paper_grid: $1 needs a value" >&2; exit 2; }
        case $1 in --out) out=$2 ;; --build) build=$2 ;; esac
        shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -u$/{/^set -u$/!p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "paper_grid: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
done
repeat=3 main=--paper
[ $quick = 1 ] && repeat=1 main=--paper-quick
small=(--models "googlenet inception-v3" --gbps 10 --schemes "ps+wfbp hybrid allreduce+wfbp"
       --repeat "$repeat")
parts="main devices racks"
mkdir -p "$out"
t0=$(date +%s) total_min=0 failed=0
for p in $parts; do
    case $p in
    main) opts=("$main") ;;
    devices) opts=(--paper-quick "${small[@]}" --nodes "8 16" --devices-per-node 4) ;;
    racks) opts=(--paper-quick "${small[@]}" --nodes "16 32" --racks 8:4) ;;
    esac
    echo "== $p: experiments/validate.sh ${opts[*]} ${pass[*]} ${extra[*]}"
    log=$out/$p.log
    experiments/validate.sh "${opts[@]}" "${pass[@]}" --build "$build" --out "$out/$p" \
        "${extra[@]}" 2>&1 | tee "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || failed=1
    m=$(sed -n 's/^validate: about \([0-9]*\) min for.*/\1/p' "$log" | tail -1)
    total_min=$((total_min + ${m:-0}))
done
if [ $estimate = 1 ]; then
    echo "paper_grid: about $total_min min for the three parts (their estimates; nothing was run)"
    exit 0
fi
csv=$out/validate.csv
header=$(head -1 "$out/main/validate.csv" 2>/dev/null)
[ -n "$header" ] || { echo "paper_grid: no $out/main/validate.csv" >&2; exit 1; }
echo "$header,part" > "$csv"
for p in $parts; do
    [ -s "$out/$p/validate.csv" ] && awk -v p="$p" 'NR > 1 { print $0 "," p }' "$out/$p/validate.csv" >> "$csv"
done
. experiments/lib/error_summary.bash
echo "paper_grid: wrote $csv ($(( $(wc -l < "$csv") - 1 )) rows, $(( ($(date +%s) - t0) / 60 )) min)"
error_summary "$csv" "rows" any
error_summary "$csv" "rows that are not host-bound" 0
exit $failed
