#!/usr/bin/env bash
# Garbage sent to a worker's ports during a real `poseidon train --workers 2` run (LeNet,
# hybrid: fc1 and fc2 by SFB, the rest by PS; emulated compute, so the run lasts a few
# seconds): to rank 1's PS shard and to its SFB endpoint of fc1, each gets raw bytes that
# are not ZeroMQ at all, and a well-formed ZeroMQ (ZMTP 3.0) connection that sends frames
# with a bad header. Passes when the run still exits 0 with every iteration done and the
# worker's log shows the bad messages were dropped, and among them the ZMTP 3.0 peer's.
# The job runs --insecure: with CURVE (the default) neither peer gets past the handshake
# (test_stranger.c); here the message checks behind it are what is tested.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -15 "$tmp/log"; exit 1; }

experiments/validate_profile.sh "$build/poseidon" models/lenet.net 16 0.25 >"$tmp/prof.csv" ||
    fail "no profile"
iters=32
"$build/poseidon" train --workers 2 --model models/lenet.net --data synthetic --no-eval \
    --compute emulate --profile "$tmp/prof.csv" --batch 16 --iterations $iters \
    --report-every 1 --scheme hybrid --no-probe --timeout-ms 20000 --insecure >"$tmp/log" 2>&1 &
pid=$!

# the endpoints rank 1 logs at start-up (tcp://127.0.0.1:PORT)
ps_port="" sfb_port=""
for _ in $(seq 100); do
    ps_port=$(sed -n 's|.*rank 1 endpoint: PS shard tcp://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/log" | head -1)
    sfb_port=$(sed -n 's|.*rank 1 endpoint: sfb of fc1 tcp://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/log" | head -1)
    [ -n "$ps_port" ] && [ -n "$sfb_port" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
done
[ -n "$ps_port" ] && [ -n "$sfb_port" ] || fail "rank 1 did not log its PS and SFB endpoints"

# ZMTP 3.0, NULL mechanism, as a DEALER: greeting (64 bytes), READY, then messages. Each
# message: a 40-byte frame that is no valid header (bad magic), then a 2-frame message with
# a 3-byte header frame and a payload.
zmtp_greeting() { # in one write: signature, version 3.0, mechanism NULL, as-server 0, filler
    local pad
    pad=$(printf '\\x00%.0s' $(seq 48))   # the text of 16 + 1 + 31 zero escapes
    printf "\\xff\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x7f\\x03\\x00NULL$pad"
}
zmtp_garbage() {
    printf '\x04\x1c\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER'
    printf '\x00\x28'; printf 'G%.0s' $(seq 40)
    printf '\x01\x03abc\x00\x05hello'
}
# the ZMTP 3.0 peer's messages, dropped (its address is known, unlike a ZMTP 1.0 peer's)
ps_dropped="comm ps rank 1: dropped bad message from .*\(127\.0\.0\.1\)|ps shard 1: rejected"
sfb_dropped="comm u[0-9]+ rank 1: dropped bad message from .*\(127\.0\.0\.1\)"
# raw bytes to PORT on a connection of their own, then a ZeroMQ peer with bad messages on
# file descriptor FD, left open: a peer that leaves at once may take its undelivered
# messages with it
send() { # send PORT FD
    { exec 5<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    head -c 3000 /dev/urandom >&5
    exec 5>&-
    { eval "exec $2<>/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    # the greeting in one write, READY only after the server's greeting has been read:
    # otherwise libzmq 4.3 failed the handshake ("unexpected command") and no frame of
    # this peer ever reached the comm
    zmtp_greeting >&"$2"
    timeout 5 head -c 64 <&"$2" >/dev/null
    zmtp_garbage >&"$2"
}
send "$ps_port" 3 || fail "could not connect to rank 1's PS shard (port $ps_port)"
send "$sfb_port" 4 || fail "could not connect to rank 1's SFB endpoint (port $sfb_port)"
# both peers stay until both rejections are logged, the run ends, or 10 s pass; an
# endpoint that has logged nothing after 1 s gets the garbage once more. (What of the raw
# bytes reaches the comm is chance: libzmq takes a first byte other than 0xff for a ZMTP
# 1.0 peer and cuts the rest into frames.)
for k in $(seq 100); do
    ps_ok=0 sfb_ok=0
    grep -Eq "$ps_dropped" "$tmp/log" && ps_ok=1
    grep -Eq "$sfb_dropped" "$tmp/log" && sfb_ok=1
    [ $ps_ok = 1 ] && [ $sfb_ok = 1 ] && break
    kill -0 $pid 2>/dev/null || break
    if [ $((k % 10)) = 0 ]; then
        [ $ps_ok = 1 ] || { exec 3>&-; send "$ps_port" 3; }
        [ $sfb_ok = 1 ] || { exec 4>&-; send "$sfb_port" 4; }
    fi
    sleep 0.1
done
exec 3>&- 4>&-

wait $pid; rc=$?; pid=""
[ $rc -eq 0 ] || fail "the run exited $rc after the garbage"
grep -q "^0\.[0-9]*,$iters," "$tmp/log" || grep -q ",$iters,,,," "$tmp/log" ||
    fail "rank 0 did not report iteration $iters"
grep -Eq "$ps_dropped" "$tmp/log" ||
    fail "no rejection logged by rank 1's PS shard"
grep -Eq "$sfb_dropped" "$tmp/log" ||
    fail "no rejection logged by rank 1's SFB endpoint"
echo "garbage to PS port $ps_port and SFB port $sfb_port: dropped, run completed"
grep -E "rejected|dropped bad" "$tmp/log" | cut -c1-60 | sort | uniq -c
exit 0
