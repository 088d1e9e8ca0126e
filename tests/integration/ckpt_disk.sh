#!/usr/bin/env bash
# Checkpoints on a small disk (a 20 MB tmpfs; root): an MLP job of 2 ranks writes 7.5 MB per
# checkpoint. Keeping 3, the third checkpoint does not fit beside the first two: the job stops
# before writing it, with one line saying how much is free and what it needs, and leaves the
# two whole checkpoints and no .tmp. Resumed keeping 1, it removes the older one, and each
# further checkpoint fits beside the one before: the job ends. Then 8 ranks on a disk with
# room for three of their checkpoints write them all.
set -u
build=${1:-build}
. tests/integration/lib/common.bash
[ "$(id -u)" = 0 ] || { echo "skip: needs root to mount a small tmpfs"; exit 77; }
d=$(mktemp -d)
trap 'umount "$d/disk" 2>/dev/null; rm -rf "$d"' EXIT
mkdir "$d/disk"
mount -t tmpfs -o size=20m tmpfs "$d/disk" 2>/dev/null || { echo "skip: cannot mount a tmpfs"; exit 77; }
job=("$build/poseidon" train --workers 2 --model models/mlp.net --scheme hybrid --data synthetic
     --synthetic-n 1024 --batch 8 --no-eval --no-probe --insecure --job-out none
     --iterations 15 --checkpoint-every 3)

"${job[@]}" --checkpoint-dir "$d/disk/ck" --set keep_checkpoints=3 >"$d/full.log" 2>&1 &&
    fail "the job ended 0 on a disk without room for its third checkpoint"
grep -q "disk/ck/iter-9: .* MB free on its disk, the checkpoint of iteration 9 (2 rank files of 3.8 MB) needs .* MB" "$d/full.log" ||
    fail "no line saying the disk is too small: $(grep -i -m3 'free\|space\|cannot' "$d/full.log")"
grep -q "No space left" "$d/full.log" && fail "the disk filled: $(grep -m1 'No space left' "$d/full.log")"
for k in 3 6; do
    [ -e "$d/disk/ck/iter-$k/COMPLETE" ] || fail "checkpoint $k is gone: $(ls -R "$d/disk/ck")"
done
[ -z "$(find "$d/disk/ck" -name '*.tmp' -o -name 'rank-*.ckpt' -path '*iter-9*')" ] ||
    fail "a partial checkpoint of 9 was left: $(find "$d/disk/ck" -path '*iter-9*')"
echo "ok: stopped before the third checkpoint: $(grep -o 'iter-9: [^:]*' "$d/full.log" | head -1)"

"${job[@]}" --resume "$d/disk/ck" --set keep_checkpoints=1 >"$d/resumed.log" 2>&1 ||
    fail "resumed keeping 1: $(tail -3 "$d/resumed.log")"
grep -q "starts at iteration 6" "$d/resumed.log" || fail "not resumed at 6: $(tail -3 "$d/resumed.log")"
left=$(cd "$d/disk/ck" && ls | tr '\n' ' ')
[ "$left" = "iter-12 " ] || fail "keeping 1, left: $left"
echo "ok: resumed at 6 keeping 1 checkpoint, ended with $left"

# 8 ranks on a disk with room for three of their checkpoints (30 MB each): every one fits
# beside the two kept, although the ranks write at once (each measures the room before any
# of them writes; measured after, a slow rank counted the others' files twice and stopped
# the job)
umount "$d/disk" && mount -t tmpfs -o size=96m tmpfs "$d/disk" || fail "cannot remount the tmpfs"
"$build/poseidon" train --workers 8 --model models/mlp.net --scheme ps+wfbp --data synthetic \
    --synthetic-n 4096 --batch 16 --no-eval --no-probe --insecure --job-out none \
    --iterations 130 --checkpoint-every 25 --checkpoint-dir "$d/disk/ck" >"$d/eight.log" 2>&1 ||
    fail "8 ranks, room for three checkpoints: $(grep -m1 'free on its disk' "$d/eight.log" || tail -2 "$d/eight.log")"
left=$(cd "$d/disk/ck" && ls | tr '\n' ' ')
[ "$left" = "iter-100 iter-125 " ] || fail "8 ranks: left $left"
echo "ok: 8 ranks wrote every checkpoint on a disk with room for three"
