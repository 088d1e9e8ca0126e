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
