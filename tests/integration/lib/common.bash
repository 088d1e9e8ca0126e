# Sourced by the integration scripts (tests/integration/*.sh): the checks that decide
# whether a script can run here (exit 77, skip, with the reason when not) and small helpers.

# Open MPI's mpirun, or skip; sets MPIRUN_ARGS (root needs --allow-run-as-root).
require_open_mpi() {
    command -v mpirun >/dev/null 2>&1 || { echo "skip: mpirun not installed (apt-get install openmpi-bin)"; exit 77; }
    mpirun --version 2>/dev/null | grep -q "Open MPI" || { echo "skip: mpirun is not Open MPI"; exit 77; }
    MPIRUN_ARGS=(--oversubscribe)
    [ "$(id -u)" = 0 ] && MPIRUN_ARGS+=(--allow-run-as-root)
}

# Root and network namespaces, or skip.
require_netns() {
    [ "$(id -u)" = 0 ] || { echo "skip: needs root for network namespaces"; exit 77; }
    ip netns add "pchk$$" 2>/dev/null && ip netns del "pchk$$" || { echo "skip: network namespaces unavailable"; exit 77; }
}

# A TCP port on 127.0.0.1 that nothing listens on now, below the kernel's ephemeral range:
# a port from that range may be taken by any outgoing connection (mpirun's daemons open
# several) between this check and the bind.
free_port() {
    local p low
    low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ -n "$low" ] && [ "$low" -gt 12000 ] || low=32768
    for _ in $(seq 50); do
        p=$(( 10000 + RANDOM % (low - 10000) ))
        ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
    done
    echo "free_port: no free port found" >&2
    return 1
}

# Fail the script with a message (a script may define its own to print more).
fail() { echo "FAIL: $*"; exit 1; }

# A rate below its bound means a slow link only when the host had cores to spare: when the
# 1-minute load average is at least the number of CPUs, the test cannot judge and skips
# (exit 77) with the reason; otherwise it fails with the message.
slow_or_busy() { # slow_or_busy MESSAGE
    local load cpus
    load=$(cut -d' ' -f1 /proc/loadavg) cpus=$(nproc)
    if awk -v l="$load" -v c="$cpus" 'BEGIN { exit !(l >= c) }'; then
        echo "skip: $1, on a busy host (load average $load on $cpus CPUs): cannot judge a rate here"
        exit 77
    fi
    fail "$1 (load average $load on $cpus CPUs)"
}

# The scripts that run experiments/validate.sh (its CSV: column 6 measured, 7 error, 8
# host_bound, 10 dilation, 11 tensor_scale). validate_run OUT LOG ARGS...: validate.sh
# --build "$build" --out OUT ARGS, logged to LOG; the script fails with the log's tail when
# it does (VALIDATE_TIMEOUT seconds at most, default 300).
validate_run() {
    local out=$1 log=$2
    shift 2
    timeout "${VALIDATE_TIMEOUT:-300}" experiments/validate.sh --build "$build" --out "$out" "$@" \
        >"$log" 2>&1 || { tail -20 "$log"; fail "validate.sh $* failed"; }
}
# validate_row OUT: the first result row of OUT/validate.csv
validate_row() { awk -F, 'NR == 2' "$1/validate.csv"; }
# error_within ROW BOUND: a measured time, and |error| at most BOUND (a fraction)
error_within() { echo "$1" | awk -F, -v b="$2" '{ e = $7 < 0 ? -$7 : $7; exit !($6 > 0 && e <= b) }'; }
# measured_within ROW_A ROW_B BOUND LABEL: B's measured time within BOUND of A's; prints the
# difference as "LABEL: +x.x%"
measured_within() {
    paste -d, <(echo "$1" | cut -d, -f6) <(echo "$2" | cut -d, -f6) | awk -F, -v b="$3" -v l="$4" '{
        d = ($2 - $1) / $1; printf "%s: %+.1f%%\n", l, 100 * d; exit !(d <= b && d >= -b) }'
}
