#!/usr/bin/env bash
# A study folder end to end: a real 2-worker run and the simulator on the job it wrote, both
# traced; the run's merged Perfetto JSON is one valid document holding every merged row; then
# `poseidon report html` on the folder, opened in headless Chromium: the page loads, and its
# inline SVG plots (the training curve, the two timelines) have a size and drawing in them.
# Exit 77 (skip) without gnuplot, or, after the other checks pass, without chromium.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
command -v gnuplot >/dev/null || { echo "skip: gnuplot not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d=$tmp/study
bin=$build/poseidon

timeout 120 "$bin" train experiments/lenet-4workers.exp --workers 2 --iterations 4 --no-eval \
    --report-every 2 --csv "$d/train.csv" --trace "$d/real" --job-out "$d/job.exp" >"$tmp/train.log" 2>&1 ||
    { tail -20 "$tmp/train.log"; fail "training failed"; }
rm -f "$d"/real-rank*
"$bin" sim "$d/job.exp" --trace "$d/sim" >"$tmp/sim.log" 2>&1 || { cat "$tmp/sim.log"; fail "sim failed"; }
echo "$bin train experiments/lenet-4workers.exp --workers 2 --iterations 4 ..." >"$d/commands.txt"

# the merged JSON: one document, a complete event per merged CSV row, a process per node
rows=$(($(wc -l <"$d/real.csv") - 1))
if command -v python3 >/dev/null; then
    python3 - "$d/real.json" "$rows" <<'PY' || fail "merged JSON"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert len(x) == int(sys.argv[2]), (len(x), sys.argv[2])
assert sorted({e["pid"] for e in x}) == [0, 1], {e["pid"] for e in x}
PY
else
    [ "$(grep -c '"ph":"X"' "$d/real.json")" -eq "$rows" ] || fail "merged JSON: not one event per row"
fi

"$bin" report html "$d" >"$tmp/html.log" 2>&1 || { cat "$tmp/html.log"; fail "report html failed"; }
page=$d/report.html
grep -q "wrote $page (2 plots)" "$tmp/html.log" || fail "expected the training curve and the timelines: $(cat "$tmp/html.log")"
grep -q "critical path (plan edges)" "$page" || fail "the timeline did not follow the job's plan"
grep -Eq '(src|href)="(http|file|/)' "$page" && fail "the page links to files: not self-contained"
# the page holds what the plots and tables say, no log line of the commands it ran
grep -Eq 'wrote |/tmp/poseidon-' "$page" && fail "a log line in the page: $(grep -E 'wrote |/tmp/poseidon-' "$page" | head -3)"

command -v chromium >/dev/null || { echo "skip: chromium not installed (scripts/deps.sh --install); the page was written"; exit 77; }
# the page plus a check that runs once it has loaded: errors caught, SVG sizes measured
cp "$page" "$tmp/check.html"
cat >>"$tmp/check.html" <<'JS'
<script>
var errors = 0;
window.addEventListener('error', function () { errors++; }, true);
window.addEventListener('load', function () {
  var svgs = document.querySelectorAll('svg'), drawn = 0;
  svgs.forEach(function (s) {
    var r = s.getBoundingClientRect();
    if (r.width > 200 && r.height > 200 && s.querySelectorAll('path,rect,polygon,use').length > 20) drawn++;
  });
  var p = document.createElement('pre');
  p.id = 'pagecheck';
  p.textContent = 'svgs=' + svgs.length + ' drawn=' + drawn + ' errors=' + errors;
  document.body.appendChild(p);
});
</script>
JS
timeout 90 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 \
    --dump-dom "file://$tmp/check.html" >"$tmp/dom.html" 2>"$tmp/chromium.log" ||
    { tail -5 "$tmp/chromium.log"; fail "chromium could not load the page"; }
result=$(grep -o 'svgs=[0-9]* drawn=[0-9]* errors=[0-9]*' "$tmp/dom.html")
echo "chromium: $result"
[ "$result" = "svgs=2 drawn=2 errors=0" ] || fail "expected 2 drawn SVG plots and no error, got '$result'"
exit 0
