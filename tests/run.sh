#!/usr/bin/env bash
# run.sh BUILD-DIR: every test — the unit runner, then each tests/integration/*.sh (exit 0
# pass, 77 skip, anything else fail) — and one closing line "N passed, N failed, N skipped".
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export POSEIDON_BUILD=$build

passed=0 failed=0 skipped=0
log=$(mktemp)
"$build/test_unit" | tee "$log"
unit_rc=${PIPESTATUS[0]}
read -r p f s < <(awk '/^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ {print $1, $3, $5}' "$log" | tail -1)
rm -f "$log"
if [ -z "${p:-}" ]; then
    echo "FAIL unit runner ended without a summary (exit $unit_rc)"
    failed=$((failed + 1))
else
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    [ "$unit_rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1))
fi

for t in tests/integration/*.sh; do
    [ -e "$t" ] || continue
    name=$(basename "$t" .sh)
    echo "RUN  $name"
    start=$(date +%s)
    out=$(timeout 600 bash "$t" "$build" 2>&1); rc=$?
    dt=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS $name (${dt}s)"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "SKIP $name: $(echo "$out" | tail -1)"
    else
        failed=$((failed + 1)); echo "$out" | tail -20 | sed 's/^/    /'; echo "FAIL $name (exit $rc, ${dt}s)"
    fi
done

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
