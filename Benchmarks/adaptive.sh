#!/usr/bin/env bash
# Adaptive per-host concurrency benchmark (issue 44, item 4): imagecache's fixed
# --per-host-concurrency settings against `auto`, each against three origins that nginx (+ Lua,
# as the latency case of prefetch.sh) serves on 127.0.0.1, one port (one host) each:
#
#   cdn    every image held LATENCY_MS (20) ms (ngx.sleep), no queue: more connections only help.
#   small  serves SLOTS (8) requests at a time, LATENCY_MS each, and queues the rest in arrival
#          order (a ticket queue in a lua_shared_dict, shared by nginx's workers); each request's
#          time in that queue is logged ($queue_ms), so a setting past the knee shows as queueing.
#   busy   answers 503 with `Retry-After: 1` when more than BUSY_LIMIT (16) requests are in
#          flight, else holds the image LATENCY_MS and sends it.
#   redirect  answers every image with a 302 to the cdn's copy after LATENCY_MS (an `http://`
#          origin that sends its clients to `https://`, or to its CDN): not in the default
#          ORIGINS. Its log counts the redirects; the images come from the cdn.
#
# For each origin (ORIGINS) and each setting (SETTINGS, default "6 8 16 64 auto auto-next default
# default-next": numbers, `auto`, `default`: neither --concurrency nor --per-host-concurrency
# given, the tool as it comes, and `auto-next` or `default-next`: that setting in a cache whose
# state the earlier runs of it against the same origin left, the first of them unmeasured, as a
# night after nights: what the state remembers of an origin, such as its refusals), IMAGES
# (5,000) distinct JPEGs, `imagecache prefetch LIST --cache OUT --concurrency
# CONCURRENCY (64) --per-host-concurrency SETTING` into a fresh OUT on tmpfs; runs alternate
# setting by setting, origin by origin, RUNS (3) times, and the medians are reported: wall time,
# the origin's p50/p99 time in its queue (ms resolution, nearest rank) and peak requests in flight
# (counting the one arriving), from its access log; requests, 503 and 429 answers, files stored,
# exit codes. Then per origin the ratio auto/best fixed wall time, for `small` auto's p99 queue
# time against fixed 8's (its knee) and fixed 64's, for `busy` auto's 503s against the best fixed
# setting's. A binary that rejects `auto` (exit 2) is reported once and `auto` is left out.
#
#   bash Benchmarks/adaptive.sh                         # builds the release binary; needs root
#   IMAGES=300 RUNS=1 bash Benchmarks/adaptive.sh       # a smoke run (under a minute)
#   BIN=/path/to/imagecache ORIGINS=small SETTINGS="8 64 auto" bash Benchmarks/adaptive.sh
#
# BIN: the binary to measure (default: build_release, as the other benchmarks). Ports: CDN_PORT,
# SMALL_PORT, BUSY_PORT, REDIRECT_PORT (18281-18284). FLAGS: further prefetch flags for every run (none).
# The origins: LATENCY_MS, SLOTS, BUSY_LIMIT. WORK: the tmpfs mount point (Benchmarks/work/adaptive).
# LOGS: a folder that keeps each run's origin log and imagecache's stderr (ORIGIN-SETTING-RUN.log,
# .stderr; with FLAGS=-v the limit each host settled at), for a closer look than the medians.
# BASELINE: an earlier binary, for before and after in one series: a setting with `@baseline`
# (`default@baseline`, `16@baseline`) runs it, alternating with the others; the summary adds
# each such setting's wall time against the same setting of BIN.
#   BASELINE=/tmp/before/imagecache SETTINGS="default default@baseline" bash Benchmarks/adaptive.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ORIGINS=${ORIGINS:-cdn small busy}
SETTINGS=${SETTINGS:-6 8 16 64 auto auto-next default default-next}
IMAGES=${IMAGES:-5000}
RUNS=${RUNS:-3}
CONCURRENCY=${CONCURRENCY:-64}
LATENCY_MS=${LATENCY_MS:-20}
SLOTS=${SLOTS:-8}
BUSY_LIMIT=${BUSY_LIMIT:-16}
FLAGS=${FLAGS:-}
CDN_PORT=${CDN_PORT:-18281}
SMALL_PORT=${SMALL_PORT:-18282}
BUSY_PORT=${BUSY_PORT:-18283}
REDIRECT_PORT=${REDIRECT_PORT:-18284}
WORK=${WORK:-$PWD/Benchmarks/work/adaptive}
BIN=${BIN:-}
LOGS=${LOGS:-}
BASELINE=${BASELINE:-}

for origin in $ORIGINS; do
  case $origin in
    cdn | small | busy | redirect) ;;
    *) echo "unknown origin '$origin' in ORIGINS (cdn small busy redirect)" >&2; exit 2 ;;
  esac
done
for setting in $SETTINGS; do
  [[ $setting =~ ^((auto|default)(-next)?|[1-9][0-9]*)(@baseline)?$ ]] || {
    echo "SETTINGS: '$setting' is neither a number nor auto, default, auto-next or default-next" \
      "(each with @baseline or not)" >&2
    exit 2
  }
  if [[ $setting == *@baseline && ! -x $BASELINE ]]; then
    echo "SETTINGS: '$setting' needs BASELINE, an executable (BASELINE='$BASELINE')" >&2
    exit 2
  fi
done
port_of() {
  case $1 in
    cdn) echo "$CDN_PORT" ;; small) echo "$SMALL_PORT" ;; busy) echo "$BUSY_PORT" ;;
    redirect) echo "$REDIRECT_PORT" ;;
  esac
}

bash scripts/install-system-packages nginx libnginx-mod-http-lua curl
source Benchmarks/common.sh
if [ -z "$BIN" ]; then build_release; fi
[ -x "$BIN" ] || { echo "BIN=$BIN is not an executable" >&2; exit 2; }

make_work 2g
mkdir -p "$WORK/www/img" "$WORK/nginx/lua" "$WORK/lists"

generate_jpegs "$WORK/www/img" "$IMAGES"

# The origins' Lua, loaded by nginx's master (init_by_lua) before it forks the workers. Every
# request is counted in flight (a lua_shared_dict counter per origin, shared by the workers) from
# its access phase to its log phase: the log phase runs for every request, also one whose client
# went away (lua_check_client_abort is off, so the handler runs to its end), so the counters
# come back to 0 after each run.
cat > "$WORK/nginx/lua/adaptive.lua" <<'LUA'
local M = {}
local dict = ngx.shared.adaptive

local function enter(origin)
  local n = dict:incr(origin, 1, 0)
  ngx.ctx.origin = origin
  ngx.var.inflight = n
  return n
end

-- log_by_lua: the request leaves its origin (and, on the small one, frees its slot)
function M.leave()
  local origin = ngx.ctx.origin
  if origin then
    dict:incr(origin, -1, 0)
    ngx.ctx.origin = nil
  end
  if ngx.ctx.ticket then
    dict:incr("small:done", 1, 0)
    ngx.ctx.ticket = nil
  end
end

function M.cdn(latency)
  enter("cdn")
  ngx.sleep(latency)
end

-- A FIFO queue in front of `slots` servers: ticket t is served once t <= done + slots (done: the
-- tickets whose requests have ended). A waiter more than `slots` places back cannot be let in
-- within latency/4 (at most `slots` requests end per `latency`), so it polls every latency/4;
-- the rest every millisecond.
function M.small(slots, latency)
  enter("small")
  ngx.update_time()
  local start = ngx.now()
  local ticket = dict:incr("small:ticket", 1, 0)
  ngx.ctx.ticket = ticket
  while true do
    local behind = ticket - (dict:get("small:done") or 0) - slots
    if behind <= 0 then break end
    ngx.sleep(behind > slots and latency / 4 or 0.001)
  end
  ngx.update_time()
  ngx.var.queue_ms = string.format("%.0f", (ngx.now() - start) * 1000)  -- ngx.now(): ms
  ngx.sleep(latency)
end

function M.busy(limit, latency)
  if enter("busy") > limit then
    dict:incr("busy", -1, 0)  -- an answer at once: it does not hold a place
    ngx.ctx.origin = nil
    ngx.header["Retry-After"] = "1"
    return ngx.exit(503)
  end
  ngx.sleep(latency)
end

-- After `latency`, the same image on the cdn (port `port`), as a 302.
function M.redirect(latency, port)
  enter("redirect")
  ngx.sleep(latency)
  return ngx.redirect("http://127.0.0.1:" .. port .. ngx.var.uri, 302)
end

return M
LUA
chmod -R a+rX "$WORK/nginx/lua"

latency=$(python3 -c "print($LATENCY_MS / 1000)")
origin_server() {  # origin lua-call
  cat <<CONF
  server {
    listen 127.0.0.1:$(port_of "$1") backlog=4096;
    access_log $WORK/nginx/$1.log origin;
    location /img/ {
      set \$queue_ms -;
      set \$inflight -;
      access_by_lua_block { adaptive.$2 }
      log_by_lua_block { adaptive.leave() }
      alias $WORK/www/img/;
    }
    location = /inflight {
      access_log off;
      content_by_lua_block { ngx.print(ngx.shared.adaptive:get("$1") or 0) }
    }
  }
CONF
}
NGINX_MAIN="load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;" start_nginx 2 4096 <<CONF
  keepalive_requests 100000;
  lua_shared_dict adaptive 1m;
  lua_package_path "$WORK/nginx/lua/?.lua;;";
  init_by_lua_block { adaptive = require "adaptive" }
  log_format origin '\$msec \$status \$queue_ms \$inflight \$request_time \$request_uri';
$(origin_server cdn "cdn($latency)")
$(origin_server small "small($SLOTS, $latency)")
$(origin_server busy "busy($BUSY_LIMIT, $latency)")
$(origin_server redirect "redirect($latency, $CDN_PORT)")
CONF
for origin in $ORIGINS; do
  curl -s -o /dev/null -w "$origin (port $(port_of $origin)): HTTP %{http_code}, first byte %{time_starttransfer} s\n" \
    "http://127.0.0.1:$(port_of $origin)/img/0.jpg"
  for i in $(seq 0 $((IMAGES - 1))); do echo "http://127.0.0.1:$(port_of $origin)/img/$i.jpg"; done \
    > "$WORK/lists/$origin.txt"
done

fresh() { rm -rf "$1"; mkdir -p "$1"; }
files_in() { find "$1" -type f -name '*.jpg' | wc -l; }
# Runs CMD into a fresh, synced OUT; sets MS to its wall time in milliseconds (monotonic) and RC
# to its exit code (its stderr in $WORK/stderr).
# With STATE set, OUT's namespace starts with that state folder (copied in before the clock).
timed_run() {  # out
  local out=$1 start
  fresh "$out"
  if [ -n "${STATE:-}" ]; then mkdir -p "$out/default"; cp -a "$STATE" "$out/default/.imagecache"; fi
  sync
  start=$(date +%s%N)
  RC=0
  "${CMD[@]}" >/dev/null 2>"$WORK/stderr" || RC=$?
  MS=$(( ($(date +%s%N) - start) / 1000000 ))
}
prefetch_cmd() {  # origin setting out
  local bin=$BIN setting=$2
  if [[ $setting == *@baseline ]]; then bin=$BASELINE; setting=${setting%@baseline}; fi
  setting=${setting%-next}
  CMD=("$bin" prefetch "$WORK/lists/$1.txt" --cache "$3")
  # default: the tool's own limits, none given
  if [ "$setting" != default ]; then
    CMD+=(--concurrency "$CONCURRENCY" --per-host-concurrency "$setting")
  fi
  if [ -n "$FLAGS" ]; then CMD+=($FLAGS); fi
}
# Waits (10 s at most) until the origin has no request in flight (a client that exited may leave
# some being held), then a moment more for nginx to write their log lines.
settle() {  # origin
  local left
  for _ in $(seq 100); do
    left=$(curl -s "http://127.0.0.1:$(port_of "$1")/inflight")
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  [ "$left" = 0 ] || echo "$1: still $left requests in flight after 10 s" >&2
  sleep 0.2
}

# Does the binary take `auto`? Usage errors (exit 2) come before the cache lock and any request;
# a dry run of one URL into an existing cache is otherwise exit 0, as a fixed setting shows.
probe() {  # setting: its exit code in RC
  prefetch_cmd "$(echo $ORIGINS | cut -d' ' -f1)" "$1" "$WORK/probe"
  RC=0
  "${CMD[@]}" --dry-run -q >/dev/null 2>"$WORK/stderr" || RC=$?
}
mkdir -p "$WORK/probe/default"
probe 6
if [ "$RC" != 0 ]; then echo "a dry run with a fixed setting failed:" >&2; cat "$WORK/stderr" >&2; exit 1; fi
if [[ " $SETTINGS " == *" auto"* ]]; then
  probe auto
  if [ "$RC" = 2 ]; then
    echo "auto: not supported by this binary"
    SETTINGS=$(for s in $SETTINGS; do [[ "$s" == auto* ]] || echo "$s"; done | xargs)
  fi
fi
rm -rf "$WORK/probe"
[ -n "$SETTINGS" ] || { echo "no settings left to run" >&2; exit 1; }

results=$WORK/adaptive.results out=$WORK/out
rm -f "$results"
for origin in $ORIGINS; do : > "$WORK/nginx/$origin.log"; done  # nginx keeps them open
# auto-next's (default-next's) first night, unmeasured: the state it leaves is the first
# measured run's.
for next in $SETTINGS; do
  [[ ${next%@baseline} == *-next ]] || continue
  for origin in $ORIGINS; do
    prefetch_cmd "$origin" "$next" "$out"
    STATE= timed_run "$out"
    settle "$origin"
    : > "$WORK/nginx/$origin.log"
    rm -rf "$WORK/state-$origin-$next"
    cp -a "$out/default/.imagecache" "$WORK/state-$origin-$next"
  done
done
for run in $(seq "$RUNS"); do
  for origin in $ORIGINS; do
    for setting in $SETTINGS; do
      prefetch_cmd "$origin" "$setting" "$out"
      STATE=
      if [[ ${setting%@baseline} == *-next ]]; then STATE=$WORK/state-$origin-$setting; fi
      timed_run "$out"
      if [ -n "$STATE" ]; then rm -rf "$STATE"; cp -a "$out/default/.imagecache" "$STATE"; fi
      settle "$origin"
      if [ "$RC" = 2 ] && [[ "$setting" == auto* ]]; then  # the probe passed, the run did not
        echo "auto: not supported by this binary"; cat "$WORK/stderr" >&2
        SETTINGS=$(for s in $SETTINGS; do [[ "$s" == auto* ]] || echo "$s"; done | xargs)
        : > "$WORK/nginx/$origin.log"
        continue
      fi
      if [ "$RC" != 0 ]; then
        echo "$origin $setting run $run: exit $RC: $(tail -1 "$WORK/stderr")" >&2
      fi
      # the run's requests, from the origin's log: count, 503s, 429s, queue p50 and p99, peak in
      # flight (nearest-rank percentiles; "-" when the origin has no queue)
      stats=$(python3 - "$WORK/nginx/$origin.log" <<'PY'
import math, sys
lines = [l.split() for l in open(sys.argv[1]) if " /img/" in l]
status = [l[1] for l in lines]
queue = sorted(float(l[2]) for l in lines if l[2] != "-")
inflight = [int(l[3]) for l in lines if l[3] != "-"]
def pct(p):
    return f"{queue[max(0, math.ceil(p / 100 * len(queue)) - 1)]:g}" if queue else "-"
print(len(lines), status.count("503"), status.count("429"), pct(50), pct(99), max(inflight, default=0))
PY
)
      if [ -n "$LOGS" ]; then
        cp "$WORK/nginx/$origin.log" "$LOGS/$origin-$setting-$run.log"
        cp "$WORK/stderr" "$LOGS/$origin-$setting-$run.stderr"
      fi
      : > "$WORK/nginx/$origin.log"
      echo "$origin $setting $run $MS $RC $(files_in "$out") $stats" >> "$results"
    done
  done
  echo "run $run of $RUNS done" >&2
done
rm -rf "$out"

python3 - "$results" "$RUNS" "$IMAGES" "$CONCURRENCY" "$LATENCY_MS" "$SLOTS" "$BUSY_LIMIT" "$ORIGINS" <<'PY'
import statistics, sys
results, runs, images, concurrency, latency, slots, busy_limit = sys.argv[1:8]
origins = sys.argv[8].split()
rows = {}
for line in open(results):
    origin, setting, run, ms, rc, files, requests, s503, s429, q50, q99, peak = line.split()
    rows.setdefault((origin, setting), []).append(dict(
        wall=int(ms) / 1000, rc=int(rc), files=int(files), requests=int(requests),
        s503=int(s503), s429=int(s429), q50=None if q50 == "-" else float(q50),
        q99=None if q99 == "-" else float(q99), peak=int(peak)))
def med(key, field):
    values = [r[field] for r in rows[key] if r[field] is not None]
    return statistics.median(values) if values else None
def ms(value):
    return "-" if value is None else f"{value:g} ms"
titles = {
    "cdn": f"(a) cdn: {latency} ms per image, no queue",
    "small": f"(b) small: {slots} at a time, {latency} ms each, the rest queued",
    "busy": f"(c) busy: 503 + Retry-After: 1 above {busy_limit} in flight, else {latency} ms",
    "redirect": f"redirect: a 302 to the cdn's copy after {latency} ms (its log: the redirects)",
}
adaptive = ("auto", "auto-next", "default", "default-next")
def order(setting):
    plain, _, baseline = setting.partition("@")
    return (1 if plain in adaptive else 0,
            adaptive.index(plain) if plain in adaptive else int(plain), baseline)
for origin in origins:
    settings = sorted({s for (o, s) in rows if o == origin}, key=order)
    if not settings:
        continue
    print()
    print(f"### {titles[origin]} ({images} images, --concurrency {concurrency} but for default, "
          f"medians of {runs} alternating runs)")
    print()
    print("| --per-host-concurrency | wall | queue p50 | queue p99 | peak in flight | requests "
          "| 503 | 429 | files (min) | exit codes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for setting in settings:
        key = (origin, setting)
        codes = ",".join(str(c) for c in sorted({r["rc"] for r in rows[key]}))
        print(f"| {setting} | {med(key, 'wall'):.3f} s | {ms(med(key, 'q50'))} | {ms(med(key, 'q99'))} "
              f"| {med(key, 'peak'):g} | {med(key, 'requests'):g} | {med(key, 's503'):g} "
              f"| {med(key, 's429'):g} | {min(r['files'] for r in rows[key])} | {codes} |")
    print()
    for setting in settings:
        plain = setting.partition("@")[0]
        if setting != plain and plain in settings:
            print(f"- {plain}/{setting} wall = "
                  f"{med((origin, plain), 'wall') / med((origin, setting), 'wall'):.2f}")
    fixed = [s for s in settings if s not in adaptive and "@" not in s]
    best = min(fixed, key=lambda s: med((origin, s), "wall")) if fixed else None
    auto = (origin, "auto") if "auto" in settings else None
    if best is None:
        print("- no fixed setting ran")
    elif auto is None:
        print(f"- best fixed: {best} ({med((origin, best), 'wall'):.3f} s); auto not run")
    else:
        print(f"- auto/best fixed ({best}) wall = "
              f"{med(auto, 'wall') / med((origin, best), 'wall'):.2f}")
    for other in ("auto-next", "default", "default-next"):
        if best is not None and other in settings:
            print(f"- {other}/best fixed ({best}) wall = "
                  f"{med((origin, other), 'wall') / med((origin, best), 'wall'):.2f}")
    if origin == "small":
        knee = (origin, str(slots))
        if knee in rows and med(knee, "q99") is not None:
            base = med(knee, "q99")
            def vs(key):  # the ratio, and the times themselves (fixed 8's p99 may well be 0)
                value = med(key, "q99")
                ratio = f"{value / base:.2f}" if base > 0 else "n/a"
                return f"{ratio} ({value:g} ms against {base:g} ms)"
            for other in adaptive:
                if other in settings:
                    print(f"- queue p99: {other}/fixed {slots} = {vs((origin, other))}")
            if (origin, "64") in rows:
                print(f"- queue p99: fixed 64/fixed {slots} = {vs((origin, '64'))}")
        else:
            print(f"- fixed {slots} (the knee) not in SETTINGS: no queue ratio")
    if origin == "busy" and best is not None and any(s in settings for s in adaptive):
        print("- 503s: " + "".join(f"{s} {med((origin, s), 's503'):g}, " for s in adaptive
                                   if s in settings)
              + f"best fixed ({best}) {med((origin, best), 's503'):g}")
PY
