#!/usr/bin/env bash
# A sweep of 24 configurations (VGG19 and its four schemes, 2, 4 and 8 nodes, 40 and 10 GbE)
# run four ways: one process (-j 1), three processes (-j 3), and cut into three parts (one of
# them on two processes) merged by `poseidon report merge`. The four CSVs must be the same
# bytes once the wall_s column (the host's time, found by its header name) is cut out, rows
# in the same order; the table on stdout of -j 3 the same as -j 1's. Then the merge must
# refuse a missing part, a part given twice, a part of another sweep and a part cut short,
# each with one line naming the fault, and write nothing. Last, a configuration that fails
# mid-sweep (its trace file is a directory): -j 3 must stop as -j 1 does, exit 1 after the
# rows of the configurations before it, with the same table.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$build/poseidon
sweep=(experiments/vgg19.exp --set sweep_nodes=2,4,8 --set iterations=2)

# the CSV without its wall_s column
no_wall() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "wall_s") w = i }
             { out = ""; for (i = 1; i <= NF; i++) if (i != w) out = out (out == "" && i == 1 ? "" : ",") $i
               print out }' "$1"
}

"$bin" sim "${sweep[@]}" -j 1 --csv "$tmp/j1.csv" >"$tmp/j1.txt" 2>"$tmp/err" || { cat "$tmp/err"; fail "sim -j 1"; }
"$bin" sim "${sweep[@]}" -j 3 --csv "$tmp/j3.csv" >"$tmp/j3.txt" 2>"$tmp/err" || { cat "$tmp/err"; fail "sim -j 3"; }
[ "$(wc -l <"$tmp/j1.csv")" -eq 25 ] || fail "expected 24 rows and a header, got $(wc -l <"$tmp/j1.csv") lines"
grep -q wall_s "$tmp/j1.csv" || fail "no wall_s column"
cmp <(no_wall "$tmp/j1.csv") <(no_wall "$tmp/j3.csv") || fail "-j 3 CSV differs from -j 1's"
cmp "$tmp/j1.txt" "$tmp/j3.txt" || fail "-j 3 table differs from -j 1's"
for i in 1 2 3; do
    "$bin" sim "${sweep[@]}" --part $i/3 -j $((i == 2 ? 2 : 1)) --csv "$tmp/part$i.csv" \
        >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "sim --part $i/3"; }
done
head -1 "$tmp/part2.csv" | grep -q '^# poseidon sim part 2/3 configurations 24 experiment ' ||
    fail "part 2's first line: $(head -1 "$tmp/part2.csv")"
"$bin" report merge "$tmp/part3.csv" "$tmp/part1.csv" "$tmp/part2.csv" -o "$tmp/merged.csv" \
    2>"$tmp/err" || { cat "$tmp/err"; fail "merge"; }
cmp <(no_wall "$tmp/j1.csv") <(no_wall "$tmp/merged.csv") || fail "merged parts differ from one run"

# refusals: exit 2, one line, nothing written
refuse() {
    local what=$1 pattern=$2
    shift 2
    rm -f "$tmp/bad.csv"
    "$bin" report merge "$@" -o "$tmp/bad.csv" 2>"$tmp/err" && fail "merge accepted $what"
    grep -q "$pattern" "$tmp/err" || { cat "$tmp/err"; fail "merge of $what: no line matching '$pattern'"; }
    [ ! -e "$tmp/bad.csv" ] || fail "merge of $what wrote a file"
}
refuse "a missing part" "part 3/3 missing" "$tmp/part1.csv" "$tmp/part2.csv"
refuse "a part twice" "part 2/3 given twice" "$tmp/part1.csv" "$tmp/part2.csv" "$tmp/part2.csv" "$tmp/part3.csv"
"$bin" sim "${sweep[@]}" --set batch=16 --part 3/3 --csv "$tmp/other3.csv" >/dev/null 2>&1 ||
    fail "sim --part 3/3 of another sweep"
refuse "another sweep's part" "different sweeps" "$tmp/part1.csv" "$tmp/part2.csv" "$tmp/other3.csv"
head -n -1 "$tmp/part3.csv" >"$tmp/short3.csv"
refuse "a part cut short" "stopped early" "$tmp/part1.csv" "$tmp/part2.csv" "$tmp/short3.csv"
refuse "a whole run's CSV" "not a part" "$tmp/j1.csv"
mkdir -p "$tmp/tr/x-8n-40g-ps.csv"
for j in 1 3; do
    "$bin" sim "${sweep[@]}" --trace "$tmp/tr/x" -j $j --csv "$tmp/fail$j.csv" >"$tmp/fail$j.txt" \
        2>"$tmp/err$j" && fail "-j $j: a failing configuration gave exit 0"
    grep -q "x-8n-40g-ps.csv: cannot write" "$tmp/err$j" || { cat "$tmp/err$j"; fail "-j $j: no error line"; }
done
[ "$(wc -l <"$tmp/fail1.csv")" -eq 3 ] || fail "-j 1 before the failure: $(wc -l <"$tmp/fail1.csv") lines, expected 3"
cmp <(no_wall "$tmp/fail1.csv") <(no_wall "$tmp/fail3.csv") || fail "-j 3 stopped otherwise than -j 1"
cmp "$tmp/fail1.txt" "$tmp/fail3.txt" || fail "-j 3's table up to the failure differs"
echo "ok: -j 3 and 3 parts merged give -j 1's CSV (24 rows, wall_s aside); 5 bad merges refused; a failure mid-sweep stops -j 3 as -j 1"
