#!/usr/bin/env bash
# run.sh BUILD SECONDS [NAME...]: runs each libFuzzer harness BUILD/fuzz_NAME (all of them
# when no NAME is given) for SECONDS seconds, one after the other, from the seed corpus
# tests/fuzz/corpus/NAME and the regression inputs tests/fuzz/regress/NAME. New inputs go to
# BUILD/corpus/NAME, crashes to BUILD/findings/NAME-*, the full log to BUILD/log/NAME.txt.
# Prints one line per harness: seconds, executions, exec/s, corpus, findings. Exit 1 when a
# harness found anything.
set -u
build=${1:?usage: run.sh BUILD SECONDS [NAME...]}
seconds=${2:?usage: run.sh BUILD SECONDS [NAME...]}
shift 2
cd "$(dirname "$0")/../.."
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); names+=("${n#fuzz_}"); done
fi
mkdir -p "$build/log" "$build/findings"
status=0
printf '%-12s %8s %12s %8s %8s %s\n' harness seconds executions exec/s corpus findings
for n in "${names[@]}"; do
    bin=$build/fuzz_$n
    [ -x "$bin" ] || { echo "$bin: not built (make fuzz)" >&2; exit 2; }
    mkdir -p "$build/corpus/$n"
    dict=()
    [ -f "tests/fuzz/$n.dict" ] && dict=(-dict="tests/fuzz/$n.dict")
    log=$build/log/$n.txt
    start=$(date +%s)
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/findings/$n-" "${dict[@]}" \
        "$build/corpus/$n" "tests/fuzz/corpus/$n" "tests/fuzz/regress/$n" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    execs=$(awk -F: '/stat::number_of_executed_units/ {gsub(/ /, "", $NF); print $NF}' "$log" | tail -1)
    rate=$(awk -F: '/stat::average_exec_per_sec/ {gsub(/ /, "", $NF); print $NF}' "$log" | tail -1)
    corpus=$(find "$build/corpus/$n" -type f | wc -l)
    found=$(find "$build/findings" -name "$n-*" -type f | wc -l)
    printf '%-12s %8s %12s %8s %8s %s\n' "$n" "$took" "${execs:-?}" "${rate:-?}" "$corpus" "$found"
    if [ $rc -ne 0 ] || [ "$found" -ne 0 ]; then
        status=1
        grep -m3 -E 'ERROR|runtime error|fuzz check failed' "$log" | sed 's/^/    /'
    fi
done
exit $status
