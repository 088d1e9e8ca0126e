#!/usr/bin/env bash
# experiments/validate.sh end to end on a tiny grid (LeNet, 2 emulated nodes at 1 Gbit/s,
# ps and hybrid, 4 iterations): both runs give a result row, the predicted and measured times
# are within 50% of each other (a loose bound: this checks the pipeline, not the accuracy,
# which the full grid reports), the steady-state CPU and host_bound columns are filled, the
# plot is written, and no namespace is left behind; --resume keeps the rows and runs nothing,
# --estimate runs nothing; a grid over two devices-per-node counts gives a row and a summary
# per count; experiments/paper_grid.sh --estimate names its three parts and sums them.
# Exit 77 (skip) when not root or without network namespaces.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
require_netns
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export EMU_ID=$(printf 'e%04x' $(( $$ & 0xffff )))   # this test's namespaces only
before=$(ip netns list | grep -c "^pns$EMU_ID-")
timeout 120 experiments/validate.sh --build "$build" --out "$tmp/v" --models lenet --nodes 2 --gbps 1 \
    --schemes "ps hybrid" --iterations 4 --warmup 1 >"$tmp/log" 2>&1 || { tail -20 "$tmp/log"; fail "validate.sh failed"; }
cat "$tmp/log" | tail -4
[ "$(awk -F, 'NR > 1' "$tmp/v/validate.csv" | wc -l)" -eq 2 ] || fail "expected 2 result rows"
awk -F, 'NR > 1 { e = $7 < 0 ? -$7 : $7; if (!($6 > 0) || e > 0.5) bad = 1 } END { exit bad }' "$tmp/v/validate.csv" ||
    fail "a row is off by more than 50%: $(cat "$tmp/v/validate.csv")"
grep -q "median" "$tmp/log" || fail "no error summary"
# steady-state CPU: logged by every rank, positive, flagged 0/1
awk -F, 'NR == 1 { ok = $8 == "host_bound" && $9 == "cpu_s_per_iter" && $10 == "host_cpu_frac"; next }
    { if (!($9 > 0) || !($10 > 0) || ($8 != 0 && $8 != 1)) ok = 0 } END { exit !ok }' "$tmp/v/validate_detail.csv" ||
    fail "bad CPU columns: $(cat "$tmp/v/validate_detail.csv")"
if command -v gnuplot >/dev/null; then [ -s "$tmp/v/validate.png" ] || fail "no plot"; fi
# every run wrote the job it executed, one configuration of the grid's experiment
for s in ps hybrid; do
    j=$tmp/v/runs/lenet-n2-1g-$s/job.exp
    grep -q "^scheme = $s$" "$j" && grep -q "^cluster.nodes = 2$" "$j" || fail "no job written for $s ($j)"
done
# --resume keeps both rows' runs and runs nothing; --estimate runs nothing and says how long
cp "$tmp/v/validate.csv" "$tmp/first.csv"
timeout 60 experiments/validate.sh --build "$build" --out "$tmp/v" --models lenet --nodes 2 --gbps 1 \
    --schemes "ps hybrid" --iterations 4 --warmup 1 --resume >"$tmp/rlog" 2>&1 || { tail -20 "$tmp/rlog"; fail "validate.sh --resume failed"; }
grep -q "(0 of 0 runs" "$tmp/rlog" || fail "--resume ran again: $(grep wrote "$tmp/rlog")"
cut -d, -f1-8 "$tmp/v/validate.csv" | cmp -s - <(cut -d, -f1-8 "$tmp/first.csv") ||
    fail "--resume changed the rows: $(cat "$tmp/first.csv" "$tmp/v/validate.csv")"
timeout 60 experiments/validate.sh --build "$build" --out "$tmp/e" --models lenet --nodes "2 4" --gbps 1 \
    --schemes "ps hybrid" --iterations 4 --warmup 1 --estimate >"$tmp/elog" 2>&1 || { tail -20 "$tmp/elog"; fail "validate.sh --estimate failed"; }
grep -q "^validate: about [0-9]* min for 4 runs" "$tmp/elog" || fail "no estimate: $(tail -3 "$tmp/elog")"
[ ! -d "$tmp/e/runs/lenet-n2-1g-ps" ] || [ -z "$(ls "$tmp/e/runs/lenet-n2-1g-ps")" ] || fail "--estimate ran something"
# the papers' grid in its three parts (experiments/paper_grid.sh): --estimate gives each
# part's and their sum, and runs nothing
timeout 120 experiments/paper_grid.sh --quick --estimate --build "$build" --out "$tmp/pg" >"$tmp/plog" 2>&1 ||
    { tail -20 "$tmp/plog"; fail "paper_grid.sh --estimate failed"; }
for p in main devices racks; do grep -q "^== $p: " "$tmp/plog" || fail "paper_grid: no part $p"; done
grep -q "x 4 .*ps+wfbp" "$tmp/plog" || fail "paper_grid: no row of nodes of 4 devices"
[ "$(grep -c "^validate: about [0-9]* min for 12 runs" "$tmp/plog")" -eq 3 ] ||
    fail "paper_grid: expected three estimates of 12 runs: $(grep '^validate:' "$tmp/plog")"
grep -q "^paper_grid: about [0-9]* min for the three parts" "$tmp/plog" || fail "paper_grid: no sum"
[ ! -e "$tmp/pg/validate.csv" ] || fail "paper_grid --estimate wrote a table"
# one grid per devices-per-node count, each summarised apart
timeout 120 experiments/validate.sh --build "$build" --out "$tmp/d" --models lenet --nodes 2 --gbps 1 \
    --schemes ps --iterations 4 --warmup 1 --devices-per-node "1 2" >"$tmp/dlog" 2>&1 ||
    { tail -20 "$tmp/dlog"; fail "validate.sh --devices-per-node \"1 2\" failed"; }
[ "$(awk -F, 'NR > 1 { print $9 }' "$tmp/d/validate.csv" | sort | tr '\n' ' ')" = "1 2 " ] ||
    fail "expected one row of 1 and one of 2 devices per node: $(cat "$tmp/d/validate.csv")"
for d in 1 2; do
    grep -q "over 1 configurations of $d devices per node: median" "$tmp/dlog" || fail "no summary for D = $d"
done
[ "$(ip netns list | grep -c "^pns$EMU_ID-")" -eq "$before" ] || fail "namespaces left behind"
# the summary over the rows the host could run at speed: none when the host was busy
# throughout (both rows host-bound), and then there is nothing to judge it on
if grep -q "not host-bound: no rows" "$tmp/log"; then
    echo "skip: both rows were host-bound (a busy host); the pipeline checks above passed"
    exit 77
fi
grep -q "not host-bound: median" "$tmp/log" || fail "no summary over the rows that are not host-bound"
exit 0
