#!/usr/bin/env bash
# gpu_check.sh OUTDIR: what a machine with an NVIDIA GPU checks, in one call.
#   1. builds with CUDA (make CUDA=1), logs in OUTDIR/build.log;
#   2. runs the GPU tests (whole networks on the GPU against the CPU, the shared element-wise
#      bodies, the CUDA backend's primitives) -> OUTDIR/tests.log;
#   3. profiles AlexNet, VGG19, VGG19-22K, GoogLeNet, Inception-V3 and ResNet-152 at batch 32
#      on the GPU -> models/profiles/<gpu>-b32/<model>.csv (the simulator's format, --detail);
#   4. trains LeNet on Fashion-MNIST for one epoch on the GPU and on the CPU
#      -> OUTDIR/lenet-{cuda,cpu}.csv (skipped when the data set is absent); then half
#      precision: VGG19 and ResNet-152 profiled at bf16, LeNet at fp32 / bf16 / fp16 (2
#      workers, loss scaling) on synthetic data -> OUTDIR/half-*.csv;
#   5. times one training step of AlexNet (batch 128), VGG19 and ResNet-152 (batch 32): the sum
#      of poseidon's per-layer medians, and PyTorch's step (fp32, CUDA events, median after
#      warm-up) when python3 has torch and torchvision -> OUTDIR/step_times.csv;
#   6. distributed GPU workers: 2 workers on the GPU(s) against one worker on the union of
#      their batches (every scheme), 2 nodes x 2 devices when the host has 2 GPUs (SKIP
#      otherwise) -> OUTDIR/dist-tests.log; and a 2-worker AlexNet job (batch 32, synthetic
#      data) whose images/s and per-op trace land in OUTDIR/dist-alexnet*.csv;
#   7. imports the default ONNX exports of tests/data/onnx, profiles them on the GPU and trains
#      each for 60 steps at fp32 and bf16 -> OUTDIR/zoo.csv;
# and writes OUTDIR/summary.txt with each step's seconds. Exit 0 when the build and the tests
# passed. The steps run in the order 1, 2, 6, 3, 4b, 5, 7, 4 (what checks correctness first,
# then the figures), so that a run cut short by its machine's time keeps the tests' verdicts.
# Meant to fit in ~8 minutes on one H100.
set -u
out=${1:?usage: scripts/gpu_check.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

SECONDS=0
say "# gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if ! command -v nvidia-smi > /dev/null; then
    say "FAIL no nvidia-smi: this machine has no NVIDIA driver"
    exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
# "NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' |
      sed -e 's/^nvidia //' -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//')
say "gpu: $gpu"

# 1. build; where the Debian libraries are missing, from gpu-bundle/ (scripts/gpu_bundle.sh,
#    run on a Debian machine and carried here): the packages unpacked without root
bundle=()
if [ -d gpu-bundle/debs ]; then
    rm -rf gpu-bundle/root
    for d in gpu-bundle/debs/*.deb; do dpkg -x "$d" gpu-bundle/root || { say "FAIL dpkg -x $d"; exit 1; }; done
    bundle=(DEPS_ROOT=gpu-bundle/root ONNX_GEN=gpu-bundle/gen)
    say "libraries from gpu-bundle/ ($(ls gpu-bundle/debs | wc -l) packages)"
fi
if ! make -j"$(nproc)" CUDA=1 "${bundle[@]}" > "$out/build.log" 2>&1; then
    say "FAIL build (tail of $out/build.log):"
    tail -20 "$out/build.log" | tee -a "$summary"
    exit 1
fi
say "PASS build (${SECONDS}s)"

# 2. GPU tests
build/test_unit cuda kernels compute > "$out/tests.log" 2>&1
tests_rc=$?
say "tests: $(tail -1 "$out/tests.log") (exit $tests_rc)"
grep -E '^(FAIL|SKIP)' "$out/tests.log" | tee -a "$summary"
say "(${SECONDS}s since the start)"

# where the profiles go (steps 3 and 4b)
pdir=models/profiles/$gpu-b32
mkdir -p "$pdir"

# 6. distributed GPU workers: the equivalence tests (bounded: a hang must not eat the call)
timeout 150 build/test_unit gpu_workers > "$out/dist-tests.log" 2>&1
dist_rc=$?
say "distributed GPU tests: $(tail -1 "$out/dist-tests.log") (exit $dist_rc)"
grep -E '^(PASS|FAIL|SKIP)|worst parameter|CHECK' "$out/dist-tests.log" | tee -a "$summary"
[ $dist_rc -ne 0 ] && [ $tests_rc -eq 0 ] && tests_rc=$dist_rc
if timeout 120 build/poseidon train --workers 2 --device cuda --model models/alexnet.net \
       --data synthetic --synthetic-n 256 --batch 32 --iterations 30 --report-every 10 \
       --no-eval --threads 4 --insecure --job-out "$out/dist-alexnet.exp" --csv "$out/dist-alexnet.csv" \
       --trace "$out/dist-alexnet-trace" > "$out/dist-alexnet.log" 2>&1; then
    say "dist alexnet 2 GPU workers, batch 32 each: $(tail -1 "$out/dist-alexnet.csv" | cut -d, -f6) images/s"
else
    say "FAIL dist alexnet: $(grep -v '^\[rank' "$out/dist-alexnet.log" | tail -1)"
fi
say "(${SECONDS}s since the start)"

# 3. profiles at batch 32
echo "model,batch,layers,fwd_ms,bwd_ms,step_ms,profile_s" > "$out/profiles.csv"
for m in alexnet vgg19 vgg19-22k googlenet inception-v3 resnet-152; do
    t0=$(date +%s)
    if build/poseidon profile --device cuda --model "models/$m.net" --batch 32 --repeats 10 \
           --warmup 3 --detail --out "$pdir/$m.csv" 2> "$out/profile-$m.log"; then
        awk -F, -v m="$m" -v s=$(( $(date +%s) - t0 )) 'NR > 1 {f += $3; b += $4; n++}
            END {printf "%s,32,%d,%.3f,%.3f,%.3f,%d\n", m, n, f / 1e6, b / 1e6, (f + b) / 1e6, s}' \
            "$pdir/$m.csv" >> "$out/profiles.csv"
        say "PASS profile $m -> $pdir/$m.csv"
    else
        say "FAIL profile $m: $(tail -1 "$out/profile-$m.log")"
    fi
done

# 4b. half precision on the tensor cores: VGG19 and ResNet-152 profiled at bf16 (batch 32,
#     beside the fp32 profiles of step 3), and LeNet trained on synthetic data at fp32, bf16
#     and, on 2 workers, fp16 with loss scaling -> OUTDIR/half-*.csv
for m in vgg19 resnet-152; do
    if build/poseidon profile --device cuda --precision bf16 --model "models/$m.net" --batch 32 \
           --repeats 10 --warmup 3 --out "$pdir/$m-bf16.csv" 2> "$out/profile-$m-bf16.log"; then
        say "bf16 profile $m: $(awk -F, 'NR > 2 {f += $3; b += $4} END {printf "%.3f ms a step", (f + b) / 1e6}' "$pdir/$m-bf16.csv")"
    else
        say "FAIL bf16 profile $m: $(tail -1 "$out/profile-$m-bf16.log")"
    fi
done
for p in fp32 bf16; do
    if build/poseidon train --model models/lenet.net --device cuda --data synthetic --batch 64 \
           --iterations 320 --set precision=$p --csv "$out/half-$p.csv" --job-out none \
           > "$out/half-$p.log" 2>&1; then
        say "lenet cuda precision $p: $(tail -1 "$out/half-$p.csv")"
    else
        say "FAIL lenet cuda precision $p: $(tail -1 "$out/half-$p.log")"
    fi
done
if timeout 180 build/poseidon train --workers 2 --device cuda --model models/lenet.net \
       --data synthetic --batch 32 --iterations 200 --report-every 50 --no-eval --insecure \
       --set precision=fp16 --set wire_precision=fp16 --csv "$out/half-fp16-2w.csv" \
       --job-out none > "$out/half-fp16-2w.log" 2>&1; then
    say "lenet 2 cuda workers fp16: $(tail -1 "$out/half-fp16-2w.csv")"
else
    say "FAIL lenet 2 cuda workers fp16: $(grep -v '^\[rank' "$out/half-fp16-2w.log" | tail -1)"
fi

# 5. one training step: poseidon (sum of the per-layer medians) and PyTorch
echo "model,batch,poseidon_ms,pytorch_ms" > "$out/step_times.csv"
for mb in alexnet:128 vgg19:32 resnet-152:32; do
    m=${mb%:*} b=${mb#*:}
    ours=NA
    if build/poseidon profile --device cuda --model "models/$m.net" --batch "$b" --repeats 10 \
           --warmup 3 --out "$out/step-$m-b$b.csv" 2>> "$out/step.log"; then
        ours=$(awk -F, 'NR > 1 {t += $3 + $4} END {printf "%.3f", t / 1e6}' "$out/step-$m-b$b.csv")
    fi
    theirs=NA
    if python3 -c 'import torch, torchvision' 2> /dev/null; then
        theirs=$(python3 - "$m" "$b" 2>> "$out/step.log" <<'EOF'
import sys, torch, torchvision
name, batch = sys.argv[1], int(sys.argv[2])
net = {"alexnet": torchvision.models.alexnet, "vgg19": torchvision.models.vgg19,
       "resnet-152": torchvision.models.resnet152}[name]().cuda().float()
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
size = 227 if name == "alexnet" else 224
x = torch.randn(batch, 3, size, size, device="cuda")
y = torch.randint(0, 1000, (batch,), device="cuda")
loss_fn = torch.nn.CrossEntropyLoss()
times = []
for it in range(15):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    opt.zero_grad()
    loss_fn(net(x), y).backward()
    opt.step()
    end.record()
    torch.cuda.synchronize()
    if it >= 5:
        times.append(start.elapsed_time(end))
times.sort()
print("%.3f" % times[len(times) // 2])
EOF
) || theirs=NA
    fi
    echo "$m,$b,$ours,$theirs" >> "$out/step_times.csv"
    say "step $m batch $b: poseidon $ours ms, pytorch $theirs ms"
done

say "(${SECONDS}s since the start)"

# 7. imported networks: the default ONNX exports committed in tests/data/onnx (torchvision's
#    MobileNetV2, MobileNetV3-small, EfficientNet-B0, ShuffleNetV2, ConvNeXt and Swin stages,
#    at 32x32) imported, profiled on the GPU (batch 32) and trained for 60 steps on synthetic
#    data, at fp32 and with bf16 products -> OUTDIR/zoo.csv (first and last loss)
echo "model,precision,profile_step_ms,first_loss,last_loss,images_per_s" > "$out/zoo.csv"
for m in zoo_mobilenet_v2 zoo_mobilenet_v3_small zoo_efficientnet_b0 zoo_shufflenet_v2_x0_5 \
         zoo_convnext_2stage zoo_swin_2stage; do
    net=$out/$m.net
    if ! build/poseidon model import "tests/data/onnx/$m.onnx" -o "$net" > "$out/zoo-$m.log" 2>&1; then
        say "FAIL import $m: $(tail -1 "$out/zoo-$m.log")"
        continue
    fi
    for p in fp32 bf16; do
        ms=NA
        if build/poseidon profile --device cuda --precision $p --model "$net" --batch 32 \
               --repeats 10 --warmup 3 --out "$out/zoo-$m-$p.csv" >> "$out/zoo-$m.log" 2>&1; then
            ms=$(awk -F, '$1 !~ /^#/ && NR > 1 {t += $3 + $4} END {printf "%.3f", t / 1e6}' "$out/zoo-$m-$p.csv")
        fi
        if timeout 120 build/poseidon train --model "$net" --device cuda --data synthetic --batch 32 \
               --iterations 60 --set precision=$p --csv "$out/zoo-$m-$p-train.csv" --job-out none \
               >> "$out/zoo-$m.log" 2>&1; then
            awk -F, -v m=$m -v p=$p -v ms=$ms 'NR == 2 {first = $2} NR > 1 {last = $2; ips = $NF}
                END {printf "%s,%s,%s,%s,%s,%s\n", m, p, ms, first, last, ips}' \
                "$out/zoo-$m-$p-train.csv" >> "$out/zoo.csv"
            say "zoo $m $p: $(tail -1 "$out/zoo.csv")"
        else
            say "FAIL zoo $m $p: $(tail -1 "$out/zoo-$m.log")"
        fi
    done
done
say "(${SECONDS}s since the start)"

# 4. LeNet on Fashion-MNIST, one epoch, GPU then CPU
if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    for dev in cuda cpu; do
        if build/poseidon train --model models/lenet.net --device "$dev" --epochs 1 \
               --threads 0 --csv "$out/lenet-$dev.csv" --job-out none > "$out/lenet-$dev.log" 2>&1; then
            say "lenet $dev: $(tail -1 "$out/lenet-$dev.csv")"
        else
            say "FAIL lenet $dev: $(tail -1 "$out/lenet-$dev.log")"
        fi
    done
else
    say "SKIP lenet: no Fashion-MNIST in /usr/share/datasets/fashion-mnist"
fi

say "profiles: $pdir; figures: $out/profiles.csv, $out/step_times.csv"
exit $tests_rc
