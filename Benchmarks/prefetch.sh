#!/usr/bin/env bash
# Prefetch benchmark (issues 9 and 31): imagecache against curl and wget2 fetching the same JPEGs
# from nginx on 127.0.0.1, over HTTP/1.1 and over HTTPS + HTTP/2 (a self-signed certificate,
# which every tool is told to accept). Runs alternate tool by tool and medians are reported.
# Files are written to tmpfs, so that what is measured is each tool's own cost, not the disk's.
# The cases (CASES, any of them, in this order):
#
#   contended  IMAGES (2,000) served at once, 64 connections or streams each (as tool_cmd sets
#              them), wall and user+system CPU: a
#              loopback race where the server answers in microseconds and the tools share the
#              two cores with nginx (the regression guard of issue 9); then the same on disk
#              (DISK_RUNS of them, 0 for none).
#   warm       WARM URLs, every one a disk hit, against `xargs touch -a` on the same files.
#   manifest   peak memory of a MANIFEST_LINES-line manifest of hits.
#   latency    what a user sees from a CDN: nginx holds each image DELAYS_MS (20 and 80 ms,
#              ngx.sleep in access_by_lua) before answering; LATENCY_IMAGES (5,000) images, each
#              tool with 64 connections or streams and with its own defaults; wall and CPU.
#   jitter     the same with a CDN's spread: nginx holds each image a lognormal delay drawn from
#              the CRC-32 of its URI (the same URL always waits the same, for every tool and
#              run), median 20 ms, sigma 0.99 (p99 about 200 ms); the header gives the list's
#              median/p90/p99 and curl's first byte of a few URLs against them.
#              latency and jitter print a table per location headed by the date and the load
#              (uptime) when the case started, then the origin's view from nginx's access log
#              ($connection $connection_requests $msec $request_time): per tool the mean number
#              of requests in flight at the origin (the sum of request times over the span from
#              the first request's start to the last one's end), the connections it opened, the
#              time outside the origin's span (exec to the first request, the last answer to
#              exit) and, over HTTP/1.1, the refill delay (a connection's next request's start
#              minus the end of its previous: how soon a finished slot is used again; p50/p90,
#              ms resolution).
#   pinned     CPU per image: nginx pinned to core 0 (no delay), each tool to core 1, perf's
#              task-clock of a PINNED_IMAGES (5,000) run and of a one-image run (exec to exit).
#   waiting    CPU while waiting: 64 requests that nginx holds HOLD_S (3) seconds, task-clock
#              and context switches per second of wall, and the excess over the same 64 images
#              served at once.
#   start      exec to the first request nginx logs ($msec - $request_time in an access log,
#              against the time the tool was exec'd), one image per run.
#
#   bash Benchmarks/prefetch.sh                          # every case; needs root (tmpfs, packages)
#   IMAGES=500 RUNS=3 DISK_RUNS=1 WARM=20000 MANIFEST_LINES=200000 bash Benchmarks/prefetch.sh
#   CASES=latency RUNS=3 bash Benchmarks/prefetch.sh     # one case (about 15 minutes)
#   CASES="latency jitter" RUNS=1 LATENCY_IMAGES=300 DELAYS_MS=20 bash Benchmarks/prefetch.sh  # 30 s
#   CASES="pinned waiting start" bash Benchmarks/prefetch.sh
#   IMAGECACHE_FLAGS_64="--concurrency 64 --per-host-concurrency 8" CASES=latency ...
#
# IMAGES, when set, is also the default of LATENCY_IMAGES (latency and jitter) and PINNED_IMAGES
# (a quick run).
# BASELINE=/path/to/an/earlier/imagecache adds it as a fourth tool ("baseline", run with the same
# flags as imagecache, alternating with the others) and the ratio imagecache/baseline to each
# table: a before/after series of one change.
#   BASELINE=/tmp/before/imagecache CASES="contended warm manifest latency" bash Benchmarks/prefetch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CASES=${CASES:-contended warm manifest latency jitter pinned waiting start}
LATENCY_IMAGES=${LATENCY_IMAGES:-${IMAGES:-5000}}
PINNED_IMAGES=${PINNED_IMAGES:-${IMAGES:-5000}}
IMAGES=${IMAGES:-2000}
RUNS=${RUNS:-5}
DISK_RUNS=${DISK_RUNS:-3}
WARM=${WARM:-100000}
MANIFEST_LINES=${MANIFEST_LINES:-1000000}
DELAYS_MS=${DELAYS_MS:-20 80}
HOLD_S=${HOLD_S:-3}
START_RUNS=${START_RUNS:-$((RUNS * 2 + 1))}
# imagecache's flags for "64 connections or streams to one host", in one place
IMAGECACHE_FLAGS_64=${IMAGECACHE_FLAGS_64:---concurrency 64 --per-host-concurrency 64}
BASELINE=${BASELINE:-}
TOOLS="imagecache${BASELINE:+ baseline} curl wget2"
export TOOLS
PORT=${PORT:-18080}
TLS_PORT=${TLS_PORT:-18443}
WORK=${WORK:-$PWD/Benchmarks/work/prefetch}
DISK_OUT=${DISK_OUT:-$PWD/Benchmarks/work/prefetch-disk}

for name in $CASES; do
  case $name in
    contended | warm | manifest | latency | jitter | pinned | waiting | start) ;;
    *) echo "unknown case '$name' in CASES (contended warm manifest latency jitter pinned waiting start)" >&2; exit 2 ;;
  esac
done
has_case() { [[ " $(echo $CASES) " == *" $1 "* ]]; }

bash scripts/install-system-packages nginx libnginx-mod-http-lua wget2 curl time openssl linux-perf
source Benchmarks/common.sh
build_release
PERF=${PERF:-$(command -v perf || ls /usr/lib/linux-tools*/perf 2>/dev/null | head -1)}

make_work 8g "$DISK_OUT"
mkdir -p "$WORK/www/img" "$WORK/nginx" "$WORK/lists"

count=64  # waiting and start
if has_case contended && [ "$IMAGES" -gt "$count" ]; then count=$IMAGES; fi
if { has_case latency || has_case jitter; } && [ "$LATENCY_IMAGES" -gt "$count" ]; then count=$LATENCY_IMAGES; fi
if has_case pinned && [ "$PINNED_IMAGES" -gt "$count" ]; then count=$PINNED_IMAGES; fi
generate_jpegs "$WORK/www/img" "$count"

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -keyout "$WORK/nginx/key.pem" -out "$WORK/nginx/cert.pem" 2>/dev/null

# The same server for every case: /img/ answers at once (as in issue 9), /delayN/ holds each
# request N ms, /jitter/ a lognormal delay of its own per URI (JITTER_LUA), /hold/ HOLD_S
# seconds (ngx.sleep does not block the worker), /first/ logs when each request arrived; /delayN/
# and /jitter/ log each request to ORIGIN_LOG (on WORK's tmpfs) for the origin's view.
# $1: "shared" (2 workers, unpinned) or "pinned" (1 worker on core 0).
ORIGIN_LOG=$WORK/nginx/origin.log
# The delay of a URI: u1 and u2 uniform in (0, 1) from two parts of its CRC-32, Box-Muller's z,
# then median 20 ms * exp(0.99 z): p90 71 ms, p99 200 ms. jitter_delays (below) is the same in
# Python, and must stay so.
JITTER_LUA='local h = ngx.crc32_long(ngx.var.uri)
      local u1 = ((h % 65521) + 1) / 65522
      local u2 = ((math.floor(h / 65521) % 65519) + 1) / 65520
      local z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
      ngx.sleep(0.02 * math.exp(0.99 * z))'
NGINX_MODE=
serve() {
  [ "$NGINX_MODE" = "$1" ] && return 0
  stop_nginx
  local workers=2 cpus=
  if [ "$1" = pinned ]; then workers=1 cpus=0; fi
  local delays=""
  for ms in $DELAYS_MS; do
    delays+="    location /delay$ms/ { access_log $ORIGIN_LOG origin; access_by_lua_block { ngx.sleep($ms / 1000) } alias $WORK/www/img/; }"$'\n'
  done
  NGINX_CPUS=$cpus NGINX_MAIN="load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;" start_nginx $workers 4096 <<CONF
  keepalive_requests 100000;
  log_format first '\$msec \$request_time \$request_uri';
  log_format origin '\$connection \$connection_requests \$msec \$request_time';
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    listen 127.0.0.1:$TLS_PORT ssl http2 backlog=4096;
    ssl_certificate $WORK/nginx/cert.pem;
    ssl_certificate_key $WORK/nginx/key.pem;
    root $WORK/www;
$delays
    location /jitter/ {
      access_log $ORIGIN_LOG origin;
      access_by_lua_block {
      $JITTER_LUA
      }
      alias $WORK/www/img/;
    }
    location /hold/ { access_by_lua_block { ngx.sleep($HOLD_S) } alias $WORK/www/img/; }
    location /first/ { access_log $WORK/nginx/first.log first; alias $WORK/www/img/; }
  }
CONF
  NGINX_MODE=$1
}

port_of() { if [ "$1" = https ]; then echo "$TLS_PORT"; else echo "$PORT"; fi; }

# $WORK/lists/NAME-SCHEME.txt (one URL a line) and .curl (curl's -K form): COUNT images under
# the location PATH.
make_list() {  # name path count
  for scheme in http https; do
    for i in $(seq 0 $(($3 - 1))); do echo "$scheme://127.0.0.1:$(port_of $scheme)/$2/$i.jpg"; done \
      > "$WORK/lists/$1-$scheme.txt"
    sed 's/^\(.*\)$/url = "\1"/' "$WORK/lists/$1-$scheme.txt" > "$WORK/lists/$1-$scheme.curl"
  done
}

# Sets CMD to a tool's command for a list (made by make_list) and an output folder; ROW "64" is
# 64 connections (HTTP/1.1) or streams (HTTP/2) for every tool, "default" each tool's defaults.
tool_cmd() {  # tool scheme row list out
  local tool=$1 scheme=$2 row=$3 list=$WORK/lists/$4-$2 out=$5
  case $tool in
    imagecache | baseline)
      local bin=$BIN
      if [ "$tool" = baseline ]; then bin=$BASELINE; fi
      CMD=("$bin" prefetch "$list.txt" --cache "$out" --option allowInvalidSSLCertificates)
      if [ "$row" = 64 ]; then CMD+=($IMAGECACHE_FLAGS_64); fi ;;
    curl)
      CMD=(curl -sk --parallel --remote-name-all --output-dir "$out" -K "$list.curl")
      if [ "$row" = 64 ]; then CMD+=(--parallel-max 64); fi ;;
    wget2)
      CMD=(wget2 -q -nc --no-check-certificate -P "$out" -i "$list.txt")
      if [ "$row" = 64 ] && [ "$scheme" = http ]; then CMD+=(--max-threads=64); fi
      # one connection of 64 streams, as the other two open
      if [ "$row" = 64 ] && [ "$scheme" = https ]; then
        CMD+=(--max-threads=1 --http2-request-window=64)
      fi ;;
  esac
}

fresh() { rm -rf "$1"; mkdir -p "$1"; }
files_in() { find "$1" -type f -name '*.jpg' | wc -l; }
# perf stat -x, output: the value of an event (task-clock in ms)
perf_value() { awk -F, -v event="$2" '$3 == event { print $1 }' "$1"; }
# Runs CMD (set by tool_cmd) into a fresh, synced OUT, behind the wrapper words given (time,
# perf stat, taskset); sets MS to its wall time in milliseconds, RUN_START and RUN_END to when it
# started and ended (ns since the epoch, the clock of nginx's $msec).
timed_run() {  # out wrapper...
  local out=$1
  shift
  fresh "$out"
  sync
  RUN_START=$(date +%s%N)
  "$@" "${CMD[@]}" >/dev/null 2>&1 || true
  RUN_END=$(date +%s%N)
  MS=$(( (RUN_END - RUN_START) / 1000000 ))
}

contended() {
  serve shared
  make_list img img "$IMAGES"
  curl -sk --http2 -o /dev/null -w "nginx over TLS speaks HTTP/%{http_version}\n" \
    "https://127.0.0.1:$TLS_PORT/img/0.jpg"

  # One run: wall seconds (monotonic, ms resolution) and user+system CPU seconds, each tool
  # with 64 connections or streams as tool_cmd sets them (wget2 over HTTP/2: one connection,
  # a window of 64, as the others open).
  measure() {  # results-file tool scheme out
    local results=$1 tool=$2 scheme=$3 out=$4
    tool_cmd "$tool" "$scheme" 64 img "$out"
    timed_run "$out" /usr/bin/time -f "%U %S" -o "$WORK/cpu"
    echo "$tool $scheme $MS $(awk '{printf "%.3f", $1 + $2}' "$WORK/cpu") $(files_in "$out")" >> "$results"
  }

  table() {  # results-file runs title
    local results=$1
    echo
    echo "### $3 (medians of $2 alternating runs, $IMAGES images, 64 connections)"
    echo
    python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool, scheme, ms, cpu, files = line.split()
    rows.setdefault((tool, scheme), []).append((int(ms) / 1000, float(cpu), int(files)))
def med(tool, scheme, i):
    return statistics.median(r[i] for r in rows[(tool, scheme)])
print("| | HTTP/1.1 wall | CPU | HTTPS + HTTP/2 wall | CPU |")
print("|---|---|---|---|---|")
tools = [t for t in ("imagecache", "baseline", "curl", "wget2") if (t, "http") in rows]
for tool in tools:
    cells = []
    for scheme in ("http", "https"):
        cells += [f"{med(tool, scheme, 0):.3f} s", f"{med(tool, scheme, 1):.2f} s"]
    print(f"| {tool} | " + " | ".join(cells) + " |")
print()
if "baseline" in tools:
    for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
        print(f"- {label}: imagecache/baseline wall = "
              f"{med('imagecache', scheme, 0) / med('baseline', scheme, 0):.3f}, CPU = "
              f"{med('imagecache', scheme, 1) / med('baseline', scheme, 1):.3f}")
for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
    ours = med("imagecache", scheme, 0)
    print(f"- {label}: curl/imagecache = {med('curl', scheme, 0) / ours:.2f}, "
          f"wget2/imagecache = {med('wget2', scheme, 0) / ours:.2f} "
          f"(files: imagecache {min(r[2] for r in rows[('imagecache', scheme)])}, "
          f"curl {min(r[2] for r in rows[('curl', scheme)])}, "
          f"wget2 {min(r[2] for r in rows[('wget2', scheme)])})")
# A run that takes over 3x its tool's median is a stall (libcurl 7.88 over HTTP/2 can wait out a
# 1 s timer with data already read): the medians hide them, so they are counted here.
stalls = []
for (tool, scheme), runs in sorted(rows.items()):
    slow = [r[0] for r in runs if r[0] > 3 * med(tool, scheme, 0)]
    if slow:
        stalls.append(f"{tool} {scheme} {len(slow)} of {len(runs)} ({', '.join(f'{s:.2f} s' for s in slow)})")
print("- stalls (runs over 3x the median): " + ("; ".join(stalls) if stalls else "none"))
PY
  }

  series() {  # results-file runs out: every tool and scheme, alternating, run after run
    rm -f "$1"
    for run in $(seq "$2"); do
      for scheme in http https; do
        for tool in $TOOLS; do measure "$1" $tool $scheme "$3"; done
      done
    done
  }

  echo; echo "== contended: cold, written to tmpfs"
  series "$WORK/tmpfs.results" "$RUNS" "$WORK/out"
  table "$WORK/tmpfs.results" "$RUNS" "On tmpfs"

  if [ "$DISK_RUNS" -gt 0 ]; then
    echo; echo "== contended: cold, written to disk ($DISK_OUT; noisy, see README)"
    series "$WORK/disk.results" "$DISK_RUNS" "$DISK_OUT"
    table "$WORK/disk.results" "$DISK_RUNS" "On disk (ext4)"
  fi
  rm -rf "$WORK/out" "$DISK_OUT"
}

warm() {
  echo; echo "== warm: $WARM URLs, every one a disk hit (tmpfs), against xargs touch -a on the same files"
  make_warm_manifest
  for run in $(seq 3); do
    /usr/bin/time -f "imagecache (all hits): %e s, peak RSS %M KiB" \
      "$BIN" prefetch "$WARM_MANIFEST" --cache "$WORK/warm" 2>&1 >/dev/null | tail -1
    if [ -n "$BASELINE" ]; then
      /usr/bin/time -f "baseline (all hits): %e s, peak RSS %M KiB" \
        "$BASELINE" prefetch "$WARM_MANIFEST" --cache "$WORK/warm" 2>&1 >/dev/null | tail -1
    fi
    /usr/bin/time -f "xargs touch -a (floor): %e s" xargs touch -a < "$WORK/warm-files.txt" 2>&1 | tail -1
  done
}

WARM_MANIFEST=$WORK/warm.txt
make_warm_manifest() {
  [ -f "$WARM_MANIFEST" ] && return 0
  python3 - "$WORK/warm/default" "$WARM" "$PORT" "$WARM_MANIFEST" "$WORK/warm-files.txt" <<'PY'
import hashlib, os, sys
root, count, port, manifest, files = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
os.makedirs(root, exist_ok=True)
with open(manifest, "w") as m, open(files, "w") as f:
    for i in range(count):
        url = f"http://127.0.0.1:{port}/warm/{i}.jpg"
        path = os.path.join(root, hashlib.md5(url.encode()).hexdigest() + ".jpg")
        open(path, "wb").write(b"\xff\xd8\xff")
        m.write(url + "\n"); f.write(path + "\n")
PY
}

manifest() {
  echo; echo "== peak memory: a $MANIFEST_LINES-line manifest (the warm URLs, repeated), all hits"
  make_warm_manifest
  python3 - "$WARM_MANIFEST" "$MANIFEST_LINES" "$WORK/big.txt" <<'PY'
import sys
urls = open(sys.argv[1]).read().split()
with open(sys.argv[3], "w") as out:
    for i in range(int(sys.argv[2])):
        out.write(urls[i % len(urls)] + "\n")
PY
  for run in $(seq 3); do
    /usr/bin/time -f "imagecache prefetch, $MANIFEST_LINES lines: %e s, peak RSS %M KiB" \
      "$BIN" prefetch "$WORK/big.txt" --cache "$WORK/warm" 2>&1 | tail -1
    if [ -n "$BASELINE" ]; then
      /usr/bin/time -f "baseline prefetch, $MANIFEST_LINES lines: %e s, peak RSS %M KiB" \
        "$BASELINE" prefetch "$WORK/big.txt" --cache "$WORK/warm" 2>&1 | tail -1
    fi
  done
  rm -f "$WORK/big.txt"
}

# The delays JITTER_LUA gives /jitter/0.jpg... /jitter/(COUNT-1).jpg, in ms: with "summary", their
# median, p90, p99, mean and max; with "probes", three URIs (p10, median, p99 of the list) and
# their delays, one a line.
jitter_delays() {  # count summary|probes
  python3 - "$1" "$2" <<'PY'
import math, statistics, sys, zlib
count, what = int(sys.argv[1]), sys.argv[2]
def delay(uri):  # JITTER_LUA's, in ms
    h = zlib.crc32(uri.encode())
    u1 = (h % 65521 + 1) / 65522
    u2 = (h // 65521 % 65519 + 1) / 65520
    return 20 * math.exp(0.99 * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2))
delays = sorted((delay(f"/jitter/{i}.jpg"), f"/jitter/{i}.jpg") for i in range(count))
def q(p):  # nearest rank
    return delays[max(0, math.ceil(p * len(delays)) - 1)]
if what == "summary":
    ms = [d for d, _ in delays]
    print(f"median {statistics.median(ms):.1f} ms, p90 {q(0.9)[0]:.1f} ms, p99 {q(0.99)[0]:.1f} ms, "
          f"mean {statistics.mean(ms):.1f} ms, max {ms[-1]:.0f} ms")
else:
    for p in (0.1, 0.5, 0.99):
        print(q(p)[1], f"{q(p)[0]:.1f}")
PY
}

# The size of ORIGIN_LOG, before a run; after it, origin_cut copies what the run added to OUT,
# once it has at least LINES lines (nginx logs each request as it ends, a moment after the tool
# has its answer: 2 s at most).
origin_size() { stat -c %s "$ORIGIN_LOG" 2>/dev/null || echo 0; }
origin_cut() {  # offset lines out
  for _ in $(seq 40); do
    tail -c +$(($1 + 1)) "$ORIGIN_LOG" > "$3"
    [ "$(wc -l < "$3")" -ge "$2" ] && return 0
    sleep 0.05
  done
}

# The latency and jitter cases: LATENCY_IMAGES images from each LOCATION (delayN, jitter) for
# every tool, row (64, default) and scheme in turn, RUNS times. A table per location, headed by
# the date and the load when the case started, then the origin's view of each run (its lines of
# ORIGIN_LOG, in $WORK/origin/CASE/LOCATION.ROW.TOOL.SCHEME.RUN).
held() {  # case location...
  local name=$1 results=$WORK/$1.results out=$WORK/out origin=$WORK/origin/$1
  shift
  local started load before files
  started=$(date -u '+%Y-%m-%d %H:%M UTC')
  load=$(uptime | sed 's/.*load average: *//')
  rm -rf "$results" "$origin"
  mkdir -p "$origin"
  for run in $(seq "$RUNS"); do
    for loc in "$@"; do
      for scheme in http https; do
        for row in 64 default; do
          for tool in $TOOLS; do
            tool_cmd $tool $scheme $row "$loc" "$out"
            before=$(origin_size)
            timed_run "$out" /usr/bin/time -f "%U %S" -o "$WORK/cpu"
            files=$(files_in "$out")
            echo "$loc $row $tool $scheme $MS $(awk '{printf "%.3f", $1 + $2}' "$WORK/cpu") $files" >> "$results"
            origin_cut "$before" "$files" "$origin/$loc.$row.$tool.$scheme.$run"
            echo "run $RUN_START $RUN_END" >> "$origin/$loc.$row.$tool.$scheme.$run"
          done
        done
      done
    done
    echo "$name: run $run of $RUNS done" >&2
  done
  rm -rf "$out"
  python3 - "$results" "$origin" "$RUNS" "$LATENCY_IMAGES" "$IMAGECACHE_FLAGS_64" "$started" "$load" \
    "$(jitter_delays "$LATENCY_IMAGES" summary)" <<'PY'
import glob, math, os, statistics, sys
results, origin, runs, images, flags, started, load, jitter = sys.argv[1:9]
images = int(images)
rows = {}
for line in open(results):
    loc, row, tool, scheme, wall, cpu, files = line.split()
    rows.setdefault((loc, row, tool, scheme), []).append((int(wall) / 1000, float(cpu), int(files)))
def med(key, i):
    return statistics.median(r[i] for r in rows[key])
labels = {
    ("64", "imagecache"): f"imagecache `{flags}`",
    ("64", "curl"): "curl `--parallel --parallel-max 64`",
    ("64", "wget2"): "wget2 `--max-threads=64` / h2: `--max-threads=1 --http2-request-window=64`",
    ("default", "imagecache"): "imagecache, defaults",
    ("default", "curl"): "curl `--parallel` (50)",
    ("default", "wget2"): "wget2, defaults",
    ("64", "baseline"): f"baseline `{flags}`",
    ("default", "baseline"): "baseline, defaults",
}
def title(loc):
    if loc == "jitter":
        return f"Jitter, a lognormal delay per URL ({jitter})"
    return f"Latency {loc[len('delay'):]} ms per image"
def short(loc):
    return "jitter" if loc == "jitter" else f"latency {loc[len('delay'):]} ms"
def order(loc):
    return (1, 0) if loc == "jitter" else (0, int(loc[len("delay"):]))

# The origin's view of one run: (mean requests in flight, connections, refill delays in ms, ms
# from the tool's exec to its first request's start, ms from its last request's end to its exit).
def view(path):
    lines, run = [], None
    for line in open(path):
        fields = line.split()
        if len(fields) == 3 and fields[0] == "run":
            run = (int(fields[1]) / 1e9, int(fields[2]) / 1e9)
        elif len(fields) == 4:
            conn, n, end, took = fields
            lines.append((conn, int(n), float(end) - float(took), float(end), float(took)))
    if not lines or not run:
        return None
    first, last = min(l[2] for l in lines), max(l[3] for l in lines)
    span = last - first
    by_conn = {}
    for l in lines:
        by_conn.setdefault(l[0], []).append(l)
    refills = []
    for reqs in by_conn.values():
        reqs.sort(key=lambda l: l[1])
        refills += [(b[2] - a[3]) * 1000 for a, b in zip(reqs, reqs[1:]) if b[1] == a[1] + 1]
    return (sum(l[4] for l in lines) / span if span > 0 else float("nan"), len(by_conn), refills,
            (first - run[0]) * 1000, (run[1] - last) * 1000)
views = {}
for path in glob.glob(os.path.join(origin, "*")):
    loc, row, tool, scheme, run = os.path.basename(path).split(".")
    v = view(path)
    if v:
        views.setdefault((loc, row, tool, scheme), []).append(v)
def pct(values, p):  # nearest rank
    values = sorted(values)
    return values[max(0, math.ceil(p * len(values)) - 1)]

tools = [t for t in ("imagecache", "baseline", "curl", "wget2") if any(k[2] == t for k in rows)]
for loc in sorted({k[0] for k in rows}, key=order):
    print()
    print(f"### {title(loc)}: {images} images, medians of {runs} alternating runs; "
          f"{started}, load average {load} at the start")
    print()
    print("| | HTTP/1.1 wall | CPU | HTTPS + HTTP/2 wall | CPU | files (min) |")
    print("|---|---|---|---|---|---|")
    for row in ("64", "default"):
        for tool in tools:
            cells = []
            for scheme in ("http", "https"):
                key = (loc, row, tool, scheme)
                cells += [f"{med(key, 0):.3f} s", f"{med(key, 1):.2f} s"]
            files = "/".join(str(min(r[2] for r in rows[(loc, row, tool, s)])) for s in ("http", "https"))
            print(f"| {labels[(row, tool)]} | " + " | ".join(cells) + f" | {files} |")
    print()
    for row in ("64", "default"):
        for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
            ours = (loc, row, "imagecache", scheme)
            peer = min(("curl", "wget2"), key=lambda t: med((loc, row, t, scheme), 0))
            theirs = (loc, row, peer, scheme)
            print(f"- {'64 connections/streams' if row == '64' else 'defaults'}, {label}: "
                  f"best peer ({peer})/imagecache wall = {med(theirs, 0) / med(ours, 0):.2f}, "
                  f"CPU = {med(theirs, 1) / max(med(ours, 1), 0.001):.2f}"
                  + (f"; imagecache/baseline wall = "
                     f"{med(ours, 0) / med((loc, row, 'baseline', scheme), 0):.3f}"
                     if "baseline" in tools else ""))
    print()
    print(f"The origin's view ({short(loc)}; nginx's log, medians of the runs; "
          "refill: the start of a connection's next request minus the end of its previous, "
          "all runs' together; outside: exec to the first request's start / the last one's end "
          "to exit, ms):")
    print()
    print("| | HTTP/1.1 in flight (mean) | connections | refill p50 | refill p90 | outside | "
          "HTTPS + HTTP/2 in flight (mean) | connections | outside |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in ("64", "default"):
        for tool in tools:
            cells = []
            for scheme in ("http", "https"):
                vs = views.get((loc, row, tool, scheme), [])
                if not vs:
                    cells += ["-"] * (5 if scheme == "http" else 3)
                    continue
                cells += [f"{statistics.median(v[0] for v in vs):.1f}",
                          f"{statistics.median(v[1] for v in vs):g}"]
                outside = (f"{statistics.median(v[3] for v in vs):.0f} / "
                           f"{statistics.median(v[4] for v in vs):.0f}")
                if scheme == "https":
                    cells.append(outside)
                else:
                    refills = [r for v in vs for r in v[2]]
                    cells += [f"{pct(refills, 0.5):.0f} ms", f"{pct(refills, 0.9):.0f} ms"] if refills else ["-", "-"]
                    cells.append(outside)
            print(f"| {labels[(row, tool)]} | " + " | ".join(cells) + " |")
PY
}

latency() {
  serve shared
  echo; echo "== latency: $LATENCY_IMAGES images, each held by nginx $DELAYS_MS ms (ngx.sleep)"
  local locations=()
  for ms in $DELAYS_MS; do
    make_list "delay$ms" "delay$ms" "$LATENCY_IMAGES"
    locations+=("delay$ms")
    for scheme in http https; do
      # first byte minus the end of the handshake (pretransfer): the server's hold
      curl -sk -o /dev/null -w "$ms ms location, $scheme: first byte %{time_starttransfer} s, pretransfer %{time_pretransfer} s, HTTP/%{http_version}\n" \
        "$scheme://127.0.0.1:$(port_of $scheme)/delay$ms/0.jpg"
    done
  done
  held latency "${locations[@]}"
}

jitter() {
  serve shared
  echo; echo "== jitter: $LATENCY_IMAGES images, each held by nginx a lognormal delay of its URL's own:" \
    "$(jitter_delays "$LATENCY_IMAGES" summary)"
  make_list jitter jitter "$LATENCY_IMAGES"
  # nginx against the Python twin of its Lua: first byte minus pretransfer, over HTTP/1.1
  jitter_delays "$LATENCY_IMAGES" probes | while read -r uri ms; do
    curl -s -o /dev/null -w "%{time_starttransfer} %{time_pretransfer}\n" "http://127.0.0.1:$PORT$uri" |
      awk -v uri="$uri" -v ms="$ms" '{ printf "%s: %s ms drawn, nginx held it %.1f ms\n", uri, ms, ($1 - $2) * 1000 }'
  done
  held jitter jitter
}

pinned() {
  serve pinned
  echo; echo "== pinned: nginx on core 0 (1 worker, no delay), each tool on core 1, perf task-clock"
  make_list pinned img "$PINNED_IMAGES"
  make_list one img 1
  local results=$WORK/pinned.results out=$WORK/out
  rm -f "$results"
  for run in $(seq "$RUNS"); do
    for scheme in http https; do
      for list in one pinned; do
        for tool in $TOOLS; do
          tool_cmd $tool $scheme 64 $list "$out"
          timed_run "$out" taskset -c 1 "$PERF" stat -e task-clock -x, -o "$WORK/perf" --
          echo "$list $tool $scheme $MS $(perf_value "$WORK/perf" task-clock) $(files_in "$out")" >> "$results"
        done
      done
    done
  done
  rm -rf "$out"
  python3 - "$results" "$RUNS" "$PINNED_IMAGES" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    n, tool, scheme, wall, cpu, files = line.split()
    rows.setdefault((n, tool, scheme), []).append((int(wall), float(cpu), int(files)))
runs, images = sys.argv[2], int(sys.argv[3])
def med(key, i):
    return statistics.median(r[i] for r in rows[key])
print()
print(f"### CPU per image, pinned (task-clock; nginx on core 0, the tool on core 1; 64 connections/"
      f"streams; medians of {runs} alternating runs)")
print()
print(f"| | protocol | one image (fixed), CPU | wall | {images} images, CPU | wall | CPU per image (marginal) | files (min) |")
print("|---|---|---|---|---|---|---|---|")
def per_image(tool, scheme):
    return (med(("pinned", tool, scheme), 1) - med(("one", tool, scheme), 1)) / max(images - 1, 1)
for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
    for tool in ("imagecache", "curl", "wget2"):
        one, many = ("one", tool, scheme), ("pinned", tool, scheme)
        print(f"| {tool} | {label} | {med(one, 1):.1f} ms | {med(one, 0):.0f} ms | {med(many, 1):.0f} ms | "
              f"{med(many, 0):.0f} ms | {per_image(tool, scheme):.3f} ms | {min(r[2] for r in rows[many])} |")
print()
for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
    fixed = med(("one", "imagecache", scheme), 1) / med(("one", "curl", scheme), 1)
    each = per_image("imagecache", scheme) / per_image("curl", scheme)
    print(f"- {label}: imagecache/curl fixed cost = {fixed:.2f}, CPU per image = {each:.2f}")
PY
}

waiting() {
  serve shared
  echo; echo "== waiting: 64 requests nginx holds $HOLD_S s, against the same 64 images at once"
  make_list hold hold 64
  make_list base img 64
  local results=$WORK/waiting.results out=$WORK/out
  rm -f "$results"
  for run in $(seq "$RUNS"); do
    for scheme in http https; do
      for list in base hold; do
        for tool in $TOOLS; do
          tool_cmd $tool $scheme 64 $list "$out"
          timed_run "$out" "$PERF" stat -e task-clock,context-switches -x, -o "$WORK/perf" --
          echo "$list $tool $scheme $MS $(perf_value "$WORK/perf" task-clock) $(perf_value "$WORK/perf" context-switches) $(files_in "$out")" >> "$results"
        done
      done
    done
  done
  rm -rf "$out"
  python3 - "$results" "$RUNS" "$HOLD_S" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, tool, scheme, wall, cpu, cs, files = line.split()
    rows.setdefault((kind, tool, scheme), []).append((int(wall) / 1000, float(cpu), int(cs), int(files)))
runs, hold = sys.argv[2], float(sys.argv[3])
def med(key, i):
    return statistics.median(r[i] for r in rows[key])
print()
print(f"### CPU while waiting (64 requests held {hold:g} s, 64 connections/streams; medians of {runs} runs)")
print()
print("| | protocol | wall | task-clock | ms CPU / s wall | context switches | switches / s | "
      "excess over no hold: ms CPU / s held | switches / s held | files (min) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
    for tool in ("imagecache", "curl", "wget2"):
        h, b = ("hold", tool, scheme), ("base", tool, scheme)
        wall, cpu, cs = med(h, 0), med(h, 1), med(h, 2)
        print(f"| {tool} | {label} | {wall:.2f} s | {cpu:.0f} ms | {cpu / wall:.1f} | {cs:.0f} | {cs / wall:.0f} | "
              f"{(cpu - med(b, 1)) / hold:.1f} | {(cs - med(b, 2)) / hold:.0f} | {min(r[3] for r in rows[h])} |")
print()
for scheme, label in (("http", "HTTP/1.1"), ("https", "HTTPS + HTTP/2")):
    ours, theirs = ("hold", "imagecache", scheme), ("hold", "curl", scheme)
    print(f"- {label}: imagecache/curl CPU while held = {med(ours, 1) / med(theirs, 1):.2f}, "
          f"context switches = {med(ours, 2) / max(med(theirs, 2), 1):.2f}")
PY
}

start() {
  serve shared
  echo; echo "== start: exec to the first request nginx logs (\$msec - \$request_time), one image"
  local results=$WORK/start.results out=$WORK/out
  rm -f "$results"
  if [ -f "$WORK/nginx/first.log" ]; then : > "$WORK/nginx/first.log"; fi  # nginx keeps it open
  for run in $(seq "$START_RUNS"); do
    for scheme in http https; do
      for tool in $TOOLS; do
        # a URL of its own per run, so that its line in the log is found without doubt
        local url="$scheme://127.0.0.1:$(port_of $scheme)/first/$((run % 64)).jpg?$tool-$scheme-$run"
        echo "$url" > "$WORK/lists/first-$scheme.txt"
        echo "url = \"$url\"" > "$WORK/lists/first-$scheme.curl"
        tool_cmd $tool $scheme default first "$out"
        fresh "$out"
        python3 -c 'import os, sys, time
open(sys.argv[1], "w").write("%.6f" % time.time())
os.execvp(sys.argv[2], sys.argv[2:])' "$WORK/exec-time" "${CMD[@]}" >/dev/null 2>&1 || true
        local exited logged=
        exited=$(date +%s.%N)
        for _ in $(seq 50); do  # nginx logs after the response: wait for the line, 5 s at most
          logged=$(grep -F " /first/$((run % 64)).jpg?$tool-$scheme-$run" "$WORK/nginx/first.log" 2>/dev/null || true)
          [ -n "$logged" ] && break
          sleep 0.1
        done
        [ -n "$logged" ] || { echo "start: no request logged for $url" >&2; continue; }
        echo "$tool $scheme $(cat "$WORK/exec-time") $logged $exited" >> "$results"
      done
    done
  done
  rm -rf "$out"
  python3 - "$results" "$START_RUNS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool, scheme, exec_at, msec, request_time, uri, exited = line.split()
    first = float(msec) - float(request_time)
    rows.setdefault((tool, scheme), []).append(((first - float(exec_at)) * 1000, (float(exited) - float(exec_at)) * 1000))
print()
print(f"### Exec to first request (nginx's $msec - $request_time, ms resolution; one image; medians of {sys.argv[2]} runs)")
print()
print("| | HTTP/1.1 exec to request | exec to exit | HTTPS + HTTP/2 exec to request | exec to exit |")
print("|---|---|---|---|---|")
for tool in ("imagecache", "baseline", "curl", "wget2"):
    if not any((tool, scheme) in rows for scheme in ("http", "https")):
        continue
    cells = []
    for scheme in ("http", "https"):
        runs = rows.get((tool, scheme), [])
        if runs:
            cells += [f"{statistics.median(r[0] for r in runs):.1f} ms", f"{statistics.median(r[1] for r in runs):.1f} ms"]
        else:
            cells += ["-", "-"]
    print(f"| {tool} | " + " | ".join(cells) + " |")
PY
}

for name in contended warm manifest latency jitter pinned waiting start; do
  if has_case $name; then $name; fi
done
