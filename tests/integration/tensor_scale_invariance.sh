#!/usr/bin/env bash
# Tensors S times smaller on links S times slower do not move the result: GoogLeNet on 2
# emulated nodes at 1 Gbit/s, hybrid (its convolutions through the PS, its FC layer by SFB),
# dilated 10 times, run by experiments/validate.sh at tensor_scale 1 and 4. Both stand for
# the same cluster, so their undilated iteration times must agree within 12%. Measured on the
# 2-core development machine while other work kept it at a load of 4 (host 0.96-1.0 busy),
# 4 pairs: S = 4 ran 1.6%, 3.8%, 4.7% and 8.7% faster than S = 1 (docs/validation.md,
# "Tensors S times smaller"). The runs at S = 1 alone lay 0.319-0.340 s apart (6.6%), those
# at S = 4 0.305-0.314 s, 0.0-3.1% off the simulator: what S removes is host work per byte (CURVE,
# copies), which a busy host turns into delay at S = 1. The rank at S = 4 must also hold
# less memory than at S = 1 (its peak RSS, which each rank logs), and the run's job file
# must say the scale, and the run at S = 4 must match the simulator within 15% (measured:
# 0.0-3.1%, and +1.6% while a 32-rank emulated job beside it slowed the S = 1 run to -42.6%).
# The S = 4 run holds one of two paces, 0.300-0.303 s or 0.316-0.319 s (+4.6% to -1.4% off
# the simulator, quiet host), and once on CI S = 1 ran at -9.5% and S = 4 at +4.6%: 13.5%
# apart. So when the S = 1 run is more than 6% off the simulator, the host's own costs
# decided it and the two are not the same cluster: the comparison is not judged (exit 77, as
# the dilation test does), after the checks of the S = 4 run. Within 6%, the two paces leave
# the pair at most 11% apart. 40 s.
# The full check (each scheme on 4 nodes and an FC-heavy network, S = 1 against S = 8) is
# scripts/bench_tensor_scale.sh, in make bench.
# Exit 77 (skip) when not root or without network namespaces.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
require_netns
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export EMU_ID=$(printf 'f%04x' $(( $$ & 0xffff )))
for s in 1 4; do
    validate_run "$tmp/s$s" "$tmp/log$s" --models googlenet --nodes 2 --gbps 1 --schemes hybrid \
        --iterations 5 --warmup 2 --dilation 10 --tensor-scale $s
done
row() { validate_row "$tmp/s$1"; }
rss() { grep -ho "peak_rss_mb [0-9]*" "$tmp/s$1"/runs/*/logs/rank0.log | awk '{ print $2 }'; }
echo "S = 1: $(row 1), rank 0 peak RSS $(rss 1) MB"
echo "S = 4: $(row 4), rank 0 peak RSS $(rss 4) MB"
[ "$(row 4 | cut -d, -f11)" = 4 ] || fail "the scaled row does not say S = 4: $(row 4)"
grep -q "^tensor_scale = 4$" "$tmp"/s4/runs/*/job.exp || fail "the job file of the S = 4 run does not say tensor_scale = 4"
[ -n "$(rss 1)" ] && [ -n "$(rss 4)" ] && [ "$(rss 4)" -lt "$(rss 1)" ] ||
    fail "the rank at S = 4 held $(rss 4) MB, at S = 1 $(rss 1) MB"
error_within "$(row 4)" 0.15 ||
    fail "the run at S = 4 is more than 15% off the simulator: $(row 4)"
if ! error_within "$(row 1)" 0.06; then
    echo "skip: the run at S = 1 was more than 6% off the simulator (the host's own costs per" \
        "byte, which S removes, decided it); the run at S = 4 matched the simulator"
    exit 77
fi
measured_within "$(row 1)" "$(row 4)" 0.12 "S = 4 against S = 1" ||
    fail "tensor_scale 4 moved the iteration time by more than 12%"
exit 0
