#!/usr/bin/env bash
# Many hosts on a busy client (issue 44): how many hosts the adaptive per-host limit (the
# default) cuts "for queue" when no origin queues, and the night's wall time. nginx (+ Lua)
# answers every image after DELAY_MS (20) ms, as a CDN would, on port 18290 of HOSTS (2,000)
# loopback addresses (127.1.0.1, 127.1.0.2...: one origin each), PER (8) distinct URLs a host,
# listed host by host (ORDER=grouped) or round-robin (ORDER=interleave). With BUSY=1 (the
# default) nginx runs on core 0, and imagecache on core 1 beside a busy loop, as on a machine
# busy with other work: the client's thread waits its turn, and answers wait unread in its
# sockets. With BUSY=0 nothing is pinned and nothing else runs.
#
# Each run is `imagecache prefetch LIST --cache OUT --report REPORT` with no other flag (the
# tool as it comes), into a fresh OUT on tmpfs; BASELINE (an earlier binary) alternates with BIN
# run by run, RUNS (3) times. Printed for each run: wall time, images downloaded, hosts whose
# limit was cut for queue (from the report's hostLimits), and their share; then the medians.
#
#   bash Benchmarks/hosts.sh                                  # builds the release binary
#   BASELINE=/tmp/before/imagecache bash Benchmarks/hosts.sh  # before/after, alternating
#   HOSTS=500 PER=32 ORDER=interleave BUSY=0 bash Benchmarks/hosts.sh
#
# WORK: the tmpfs mount point (Benchmarks/work/hosts). Needs root (tmpfs) and two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS=${HOSTS:-2000}
PER=${PER:-8}
ORDER=${ORDER:-grouped}
DELAY_MS=${DELAY_MS:-20}
RUNS=${RUNS:-3}
BUSY=${BUSY:-1}
PORT=${PORT:-18290}
WORK=${WORK:-$PWD/Benchmarks/work/hosts}
BIN=${BIN:-}
BASELINE=${BASELINE:-}

case $ORDER in grouped | interleave) ;; *) echo "ORDER: grouped or interleave" >&2; exit 2 ;; esac
[[ $HOSTS =~ ^[1-9][0-9]*$ && $HOSTS -le 62500 ]] || { echo "HOSTS: 1 to 62500" >&2; exit 2; }
[[ $PER =~ ^[1-9][0-9]*$ && $DELAY_MS =~ ^[0-9]+$ ]] || { echo "PER, DELAY_MS: numbers" >&2; exit 2; }

bash scripts/install-system-packages nginx libnginx-mod-http-lua
source Benchmarks/common.sh
if [ -z "$BIN" ]; then build_release; fi
[ -x "$BIN" ] || { echo "BIN=$BIN is not an executable" >&2; exit 2; }

BUSY_PID=
stop_busy() { if [ -n "$BUSY_PID" ]; then kill "$BUSY_PID" 2>/dev/null || true; fi; }
make_work 1g
trap 'stop_busy; remove_work' EXIT
mkdir -p "$WORK/www/img"
generate_jpegs "$WORK/www/img" "$PER"
chmod a+rx "$WORK"

PIN=()
if [ "$BUSY" = 1 ]; then
  export NGINX_CPUS=0
  PIN=(taskset -c 1)
fi
NGINX_MAIN="load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;" start_nginx 2 8192 <<CONF
  server {
    listen $PORT backlog=4096;
    root $WORK/www;
    location /img/ { access_by_lua_block { if $DELAY_MS > 0 then ngx.sleep($DELAY_MS / 1000) end } }
  }
CONF

python3 - "$HOSTS" "$PER" "$ORDER" "$PORT" >"$WORK/list.txt" <<'PY'
import sys
hosts, per, order, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
names = [f"127.{1 + i // 250}.0.{i % 250 + 1}" for i in range(hosts)]
pairs = [(h, n) for h in names for n in range(per)] if order == "grouped" else \
        [(h, n) for n in range(per) for h in names]
for host, n in pairs:
    print(f"http://{host}:{port}/img/{n}.jpg")
PY

if [ "$BUSY" = 1 ]; then
  taskset -c 1 sh -c 'while :; do :; done' &
  BUSY_PID=$!
fi

TOOLS="imagecache${BASELINE:+ baseline}"
echo "$HOSTS hosts x $PER URLs ($ORDER), ${DELAY_MS} ms, busy client: $BUSY; load $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq "$RUNS"); do
  for tool in $TOOLS; do
    bin=$BIN
    if [ "$tool" = baseline ]; then bin=$BASELINE; fi
    rm -rf "$WORK/out"
    mkdir -p "$WORK/out"
    start=$(date +%s.%N)
    status=0
    "${PIN[@]}" "$bin" prefetch "$WORK/list.txt" --cache "$WORK/out/cache" \
      --report "$WORK/out/report.json" >/dev/null 2>"$WORK/out/stderr" || status=$?
    end=$(date +%s.%N)
    python3 - "$WORK/out/report.json" "$tool" "$run" "$start" "$end" "$status" <<'PY' | tee -a "$WORK/results"
import json, sys
path, tool, run, start, end, status = sys.argv[1:]
prefetch = json.load(open(path))["prefetch"]
limits = prefetch.get("hostLimits", [])
cut = sum(1 for h in limits if h.get("cuts", {}).get("queue"))
share = 100 * cut / max(1, len(limits))
print(f"{tool:<10} run {run}: exit {status}, {float(end) - float(start):.2f} s, "
      f"{prefetch['downloaded']} downloaded, {cut} of {len(limits)} hosts cut for queue ({share:.1f}%)")
PY
  done
done
stop_busy
python3 - "$WORK/results" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+run \d+: exit \d+, ([\d.]+) s, \d+ downloaded, (\d+) of (\d+)", line)
    if m:
        runs.setdefault(m[1], []).append((float(m[2]), int(m[3]), int(m[4])))
print("medians:")
for tool, rows in runs.items():
    wall = statistics.median(r[0] for r in rows)
    cut = statistics.median(r[1] for r in rows)
    print(f"  {tool:<10} {wall:.2f} s, {cut:g} hosts cut for queue"
          f" (each run: {', '.join(str(r[1]) for r in rows)} of {rows[0][2]})")
PY
