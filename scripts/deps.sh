#!/usr/bin/env bash
# deps.sh [--install] [--bench]: one ✓/✗ line per dependency. With --install, as root, installs
# the missing Debian packages (apt-get update first); otherwise prints the apt-get line to run.
# --bench adds what only `make bench` needs (PyTorch, for scripts/bench_cpu_torch.sh).
set -u
install=0 bench=0
for a in "$@"; do
    case $a in
    --install) install=1 ;;
    --bench) bench=1 ;;
    esac
done

missing=()
probe() { # probe PACKAGE DESCRIPTION TEST-COMMAND...
    local pkg=$1 what=$2; shift 2
    if "$@" >/dev/null 2>&1; then
        printf '  \342\234\223 %-24s %s\n' "$pkg" "$what"
    else
        printf '  \342\234\227 %-24s %s\n' "$pkg" "$what"
        missing+=("$pkg")
    fi
}
have_libfuzzer() { compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a' >/dev/null; }
have_torch() { "$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)" -c 'import torch'; }
have_header() { for d in /usr/include /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/local/include; do [ -e "$d/$1" ] && return 0; done; return 1; }

run_probes() {
    missing=()
    probe gcc                   "C compiler"                    command -v cc
    probe make                  "GNU make"                      command -v make
    probe pkg-config            "library flags"                 command -v pkg-config
    probe libgsl-dev            "GSL: RNG, distributions, fits" have_header gsl/gsl_rng.h
    probe libopenblas-dev       "OpenBLAS: CPU GEMM"            have_header openblas_config.h
    probe libzmq3-dev           "ZeroMQ: messaging"             have_header zmq.h
    probe libsodium-dev         "libsodium: trusted-fabric auth" have_header sodium.h
    probe zlib1g-dev            "zlib: gzip data files"         have_header zlib.h
    probe libprotobuf-c-dev     "protobuf-c: ONNX import"       have_header protobuf-c/protobuf-c.h
    probe protobuf-c-compiler   "protoc-c: ONNX schema to C"    command -v protoc-c
    probe libonnx-dev           "onnx.proto: the ONNX schema"   test -e /usr/include/onnx/onnx.proto
    probe gnuplot-nox           "gnuplot: plots"                command -v gnuplot
    probe dataset-fashion-mnist "Fashion-MNIST data"            test -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
    probe fortunes-min          "text for the char model"       test -e /usr/share/games/fortunes/fortunes
    probe openmpi-bin           "mpirun: multi-node launch"     command -v mpirun
    probe iproute2              "ip/tc: emulated clusters"      command -v ip
    probe nftables              "nft: packet loss (chaos.sh)"   command -v nft
    probe clang                 "clang: make fuzz"              command -v clang
    probe libclang-rt-14-dev    "libFuzzer runtime: make fuzz"  have_libfuzzer
    probe chromium              "headless browser: HTML report test" command -v chromium
    if [ $bench -eq 1 ]; then
        probe python3-torch     "PyTorch: make bench's CPU comparison" have_torch
    fi
}

echo "dependencies:"
run_probes
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    printf '  \342\234\223 %-24s %s\n' "cuda (optional)" "nvcc + cuBLAS: GPU backend"
else
    printf '  \342\234\227 %-24s %s\n' "cuda (optional)" "nvcc + cuBLAS: GPU backend (CPU-only build)"
fi

[ ${#missing[@]} -eq 0 ] && exit 0
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ $install -eq 1 ] && [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || { echo "apt-get update failed" >&2; exit 1; }
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || { echo "failed: $line" >&2; exit 1; }
    run_probes
    [ ${#missing[@]} -eq 0 ] || { echo "still missing after install: ${missing[*]}" >&2; exit 1; }
    exit 0
fi
echo "missing; run as root:  $line" >&2
[ $install -eq 1 ] && exit 1
exit 0
