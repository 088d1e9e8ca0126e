# Sourced by the simulation scripts that take [BUILD-DIR] [MODEL...]. sim_script_begin NAME
# DEFAULT-MODELS -- "$@" enters the repository root and sets build (BUILD-DIR, default build),
# bin (its poseidon, which must be built) and models (the MODEL arguments, or the defaults,
# a space-separated list), and makes out/experiments and out/reports.
sim_script_begin() {
    local name=$1 defaults=$2
    shift 3
    build=${1:-build}
    shift || true
    cd "$(dirname "${BASH_SOURCE[0]}")/../.."
    bin=$build/poseidon
    [ -x "$bin" ] || { echo "$name: $bin not built (make all)" >&2; exit 1; }
    models=("$@")
    # shellcheck disable=SC2206
    [ ${#models[@]} -eq 0 ] && models=($defaults)
    mkdir -p out/experiments out/reports
}
