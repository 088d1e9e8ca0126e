#!/usr/bin/env bash
# poseidon model import / show on ONNX files (tests/data/onnx/, exported by PyTorch): the
# written description holds PyTorch's parameter count, `poseidon sim` runs on the imported
# ResNet-50, ViT-B/16 and GPT-2 124M (its head tied to the embedding), and each bad input
# (truncated, not ONNX, unsupported opset, dynamic shape not given, unmapped operator,
# dilated or one-sided windows, a shared weight) exits 1 with one line naming the file, never a crash.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p="$build/poseidon"
data=tests/data/onnx

# import writes a .net whose parameters are PyTorch's (reference.csv)
"$p" model import $data/resnet50.onnx -o "$tmp/resnet50.net" 2>"$tmp/err" || fail "import: $(cat "$tmp/err")"
want=$(awk -F, '$1 == "resnet50" { print $3 }' $data/reference.csv)
got=$("$p" model show "$tmp/resnet50.net" --csv 2>/dev/null | awk -F, '$1 == "total" { print $4 }')
[ -n "$want" ] && [ "$got" = "$want" ] || fail "resnet50.net holds $got parameters, PyTorch $want"
# show reads the .onnx directly, with the same totals as the written file
a=$("$p" model show $data/resnet50.onnx --csv 2>/dev/null | tail -1)
b=$("$p" model show "$tmp/resnet50.net" --csv 2>/dev/null | tail -1)
[ "$a" = "$b" ] || fail "show of .onnx ($a) and of the imported .net ($b) differ"
# without -o the description goes to stdout, nothing else does
"$p" model import $data/vgg16.onnx >"$tmp/vgg16.net" 2>/dev/null || fail "import to stdout"
"$p" model show "$tmp/vgg16.net" >/dev/null 2>&1 || fail "vgg16 description from stdout does not parse"

# the simulator runs on the imported ResNet-50
cat >"$tmp/r50.exp" <<EXP
model = resnet50.net
cluster = $root/experiments/clusters/titanx-40gbe.cluster
scheme = hybrid
batch = 32
iterations = 3
sweep_nodes = 1,4
sweep_gbps = 10
sweep_schemes = ps,hybrid
EXP
"$p" sim "$tmp/r50.exp" --csv "$tmp/sim.csv" >"$tmp/sim.out" 2>&1 || fail "sim: $(tail -3 "$tmp/sim.out")"
rows=$(awk -F, 'NR > 1 && $1 == "resnet50" && $7 > 0' "$tmp/sim.csv" | wc -l)
[ "$rows" -eq 4 ] || fail "expected 4 simulated rows of resnet50 (1 and 4 nodes, 2 schemes): $(cat "$tmp/sim.csv")"

# ViT-B/16 imports with PyTorch's count and simulates, where the parser has sequence layers
printf 'tokens t seq=2 vocab=3\nembed e vocab=3 dim=4\n' >"$tmp/probe.net"
if "$p" model show "$tmp/probe.net" >/dev/null 2>&1; then
    "$p" model import $data/vit_b_16.onnx -o "$tmp/vit.net" 2>"$tmp/err" || fail "import vit: $(cat "$tmp/err")"
    want=$(awk -F, '$1 == "vit_b_16" { print $3 }' $data/reference.csv)
    got=$("$p" model show "$tmp/vit.net" --csv 2>/dev/null | awk -F, '$1 == "total" { print $4 }')
    [ "$got" = "$want" ] || fail "vit.net holds $got parameters, PyTorch $want"
    sed 's/^model = .*/model = vit.net/' "$tmp/r50.exp" >"$tmp/vit.exp"
    "$p" sim "$tmp/vit.exp" --csv "$tmp/vsim.csv" >"$tmp/sim.out" 2>&1 || fail "sim vit: $(tail -3 "$tmp/sim.out")"
    rows=$(awk -F, 'NR > 1 && $1 == "vit" && $7 > 0' "$tmp/vsim.csv" | wc -l)
    [ "$rows" -eq 4 ] || fail "expected 4 simulated rows of vit: $(cat "$tmp/vsim.csv")"
    # GPT-2 124M with its output head tied to the token embedding: counted once, as PyTorch does
    "$p" model import $data/gpt2_tied.onnx -o "$tmp/gpt2t.net" 2>"$tmp/err" || fail "import gpt2_tied: $(cat "$tmp/err")"
    grep -q '^linear lm_head out=50257 bias=0 tie=wte ' "$tmp/gpt2t.net" || fail "gpt2_tied: no tied lm_head: $(grep lm_head "$tmp/gpt2t.net")"
    want=$(awk -F, '$1 == "gpt2_tied" { print $3 }' $data/reference.csv)
    got=$("$p" model show "$tmp/gpt2t.net" --csv 2>/dev/null | awk -F, '$1 == "total" { print $4 }')
    [ "$got" = "$want" ] && [ "$got" = 124439808 ] || fail "gpt2t.net holds $got parameters, PyTorch $want"
    sed 's/^model = .*/model = gpt2t.net/' "$tmp/r50.exp" >"$tmp/gpt2t.exp"
    "$p" sim "$tmp/gpt2t.exp" --csv "$tmp/gsim.csv" >"$tmp/sim.out" 2>&1 || fail "sim gpt2_tied: $(tail -3 "$tmp/sim.out")"
    rows=$(awk -F, 'NR > 1 && $1 == "gpt2t" && $7 > 0' "$tmp/gsim.csv" | wc -l)
    [ "$rows" -eq 4 ] || fail "expected 4 simulated rows of gpt2t: $(cat "$tmp/gsim.csv")"
    vit="vit_b_16 and gpt2_tied too"
else
    vit="not vit_b_16: this parser has no sequence layers"
fi

# bad input: exit 1, one line (after the '#' banner) naming the file
bad() { # bad FILE EXPECTED-TEXT [ARGS...]
    local f=$1 want=$2; shift 2
    "$p" model show "$f" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    local lines; lines=$(grep -vc '^#' "$tmp/err")
    [ $rc -eq 1 ] || fail "$f: exit $rc, expected 1 ($(cat "$tmp/err"))"
    [ "$lines" -eq 1 ] || fail "$f: $lines lines on stderr: $(cat "$tmp/err")"
    grep -v '^#' "$tmp/err" | grep -q "^$f: .*$want" || fail "$f: expected '$want': $(cat "$tmp/err")"
    "$p" model import "$f" "$@" -o "$tmp/never.net" >/dev/null 2>&1 && fail "$f: import succeeded"
    [ ! -e "$tmp/never.net" ] || fail "$f: import wrote a file"
}
head -c 20000 $data/resnet50.onnx >"$tmp/truncated.onnx"
bad "$tmp/truncated.onnx" "not an ONNX model"
cp models/lenet.net "$tmp/lenet.onnx"
bad "$tmp/lenet.onnx" "not an ONNX model"
bad $data/bad_opset.onnx "operator set 99 .* not supported"
bad $data/bad_dynamic_hw.onnx "dynamic dimension 2 ('height'): give the shape with --input-shape input="
bad $data/bad_unmapped_op.onnx "node '/Sin' (Sin): operator Sin maps to no layer type"
bad $data/bad_dilated_conv.onnx "node '/conv/Conv' (Conv): dilations 2x2"
bad $data/bad_asymmetric_pad.onnx "node '/conv/Conv' (Conv): asymmetric padding"
bad $data/bad_shared_weight.onnx "weight 'fc1.weight' .* is shared with node '/fc1/MatMul': shared weights do not map"
"$p" model show $data/bad_dynamic_hw.onnx --input-shape input=1x3x40x40 >/dev/null 2>&1 ||
    fail "--input-shape did not resolve the dynamic dimensions"
"$p" model show $data/resnet50.onnx --input-shape input=1x3x224 >/dev/null 2>&1 && fail "a shape of the wrong rank was accepted"
"$p" model import models/lenet.net >/dev/null 2>&1; [ $? -eq 2 ] || fail "import of a .net file: expected usage error 2"
echo "ok: import, show, sim on resnet50 ($vit), 8 bad inputs"
