#!/usr/bin/env bash
# gpu_bundle.sh: what a lent GPU machine needs to build this project and does not have. That
# machine has CUDA, cuBLAS and PyTorch but may lack GSL, ZeroMQ, OpenBLAS and protobuf-c,
# cannot install packages and reaches no network. Run here (Debian, with the registry):
#   - downloads the Debian packages of those libraries (runtime and -dev) into gpu-bundle/debs;
#   - generates the ONNX schema's C code with protoc-c into gpu-bundle/gen (the Makefile's
#     rule needs protoc-c and onnx.proto, which that machine lacks).
# gpu-bundle/ is git-ignored; carry it to the GPU machine (16 MB), where
#   scripts/gpu_check.sh OUT unpacks the packages (dpkg -x, no root) into gpu-bundle/root and
#   builds with `make DEPS_ROOT=gpu-bundle/root ONNX_GEN=gpu-bundle/gen`.
set -eu
cd "$(dirname "$0")/.."
out=gpu-bundle
rm -rf "$out/debs" "$out/gen"
mkdir -p "$out/debs" "$out/gen"
pkgs=(libgsl-dev libgsl27 libgslcblas0
      libzmq3-dev libzmq5 libsodium-dev libsodium23 libpgm-5.3-0 libnorm1
      libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5
      libprotobuf-c-dev libprotobuf-c1)
(cd "$out/debs" && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed') ||
    { echo "gpu_bundle: apt-get download failed (is the Debian registry reachable?)" >&2; exit 1; }
proto=/usr/include/onnx/onnx.proto
[ -e "$proto" ] || { echo "gpu_bundle: $proto missing (make deps installs libonnx-dev)" >&2; exit 1; }
protoc-c -I"$(dirname "$proto")" --c_out="$out/gen" "$proto"
echo "gpu_bundle: $(ls "$out/debs" | wc -l) packages ($(du -sh "$out/debs" | cut -f1)) and the ONNX code in $out/"
