#!/usr/bin/env bash
# Prefetch benchmark (issue 9): imagecache against curl and wget2 fetching the same JPEGs from
# nginx on 127.0.0.1, 64 connections each, over HTTP/1.1 and over HTTPS + HTTP/2 (a self-signed
# certificate, which every tool is told to accept). Runs alternate tool by tool and medians are
# reported with user+system CPU. The files are written to tmpfs, so that what is measured is each
# tool's own cost, not the disk's noise; the same comparison on disk follows as a second table.
# Then a warm run (every URL a disk hit) against `xargs touch -a`, and the peak memory of a
# 1,000,000-line manifest.
#
#   bash Benchmarks/prefetch.sh                          # needs root (tmpfs, packages)
#   IMAGES=500 RUNS=3 DISK_RUNS=1 WARM=20000 MANIFEST_LINES=200000 bash Benchmarks/prefetch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${IMAGES:-2000}
RUNS=${RUNS:-5}
DISK_RUNS=${DISK_RUNS:-3}
WARM=${WARM:-100000}
MANIFEST_LINES=${MANIFEST_LINES:-1000000}
PORT=${PORT:-18080}
TLS_PORT=${TLS_PORT:-18443}
WORK=${WORK:-$PWD/Benchmarks/work/prefetch}
DISK_OUT=${DISK_OUT:-$PWD/Benchmarks/work/prefetch-disk}

bash scripts/install-system-packages nginx wget2 curl time openssl
source Benchmarks/common.sh
build_release

make_work 8g "$DISK_OUT"
mkdir -p "$WORK/www/img" "$WORK/nginx"

echo "generating $IMAGES JPEGs of 2-40 KiB ..." >&2
python3 - "$WORK/www/img" "$IMAGES" Tests/Fixtures/photo.jpg <<'PY'
import os, random, sys
root, count, base = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read()
rng = random.Random(7)
for i in range(count):
    target = rng.randint(2048, 40960)
    padding = b""
    while len(base) + len(padding) < target:  # COM segments pad a valid JPEG to size
        n = max(1, min(65533, target - len(base) - len(padding)))
        padding += b"\xff\xfe" + (n + 2).to_bytes(2, "big") + os.urandom(n)
    open(os.path.join(root, f"{i}.jpg"), "wb").write(base[:2] + padding + base[2:])
PY
chmod -R a+rX "$WORK/www"  # nginx's workers run as nobody

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -keyout "$WORK/nginx/key.pem" -out "$WORK/nginx/cert.pem" 2>/dev/null
start_nginx 2 4096 <<CONF
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    listen 127.0.0.1:$TLS_PORT ssl http2 backlog=4096;
    ssl_certificate $WORK/nginx/cert.pem;
    ssl_certificate_key $WORK/nginx/key.pem;
    root $WORK/www;
  }
CONF

for scheme in http https; do
  port=$PORT; [ "$scheme" = https ] && port=$TLS_PORT
  for i in $(seq 0 $((IMAGES - 1))); do echo "$scheme://127.0.0.1:$port/img/$i.jpg"; done \
    > "$WORK/$scheme.txt"
  sed 's/^\(.*\)$/url = "\1"/' "$WORK/$scheme.txt" > "$WORK/$scheme.curl"
done
curl -sk --http2 -o /dev/null -w "nginx over TLS speaks HTTP/%{http_version}\n" \
  "https://127.0.0.1:$TLS_PORT/img/0.jpg"

# tool name -> command for a scheme and an output folder
run_tool() {
  local tool=$1 scheme=$2 out=$3
  case $tool in
    imagecache)
      "$BIN" prefetch "$WORK/$scheme.txt" --cache "$out" --concurrency 64 \
        --per-host-concurrency 64 --option allowInvalidSSLCertificates ;;
    curl)
      curl -sk --parallel --parallel-max 64 --remote-name-all --output-dir "$out" \
        -K "$WORK/$scheme.curl" ;;
    wget2)
      wget2 --max-threads=64 -q -nc --no-check-certificate -P "$out" -i "$WORK/$scheme.txt" ;;
  esac
}

# One run: wall seconds (monotonic, ms resolution) and user+system CPU seconds.
measure() {  # results-file tool scheme out
  local results=$1 tool=$2 scheme=$3 out=$4
  rm -rf "$out"; mkdir -p "$out"; sync
  local start end
  start=$(date +%s%N)
  /usr/bin/time -f "%U %S" -o "$WORK/cpu" bash -c "$(declare -f run_tool); BIN='$BIN' WORK='$WORK' run_tool $tool $scheme '$out'" >/dev/null 2>&1
  end=$(date +%s%N)
  local files
  files=$(find "$out" -type f -name '*.jpg' | wc -l)
  echo "$tool $scheme $(( (end - start) / 1000000 )) $(awk '{printf "%.3f", $1 + $2}' "$WORK/cpu") $files" >> "$results"
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
for tool in ("imagecache", "curl", "wget2"):
    cells = []
    for scheme in ("http", "https"):
        cells += [f"{med(tool, scheme, 0):.3f} s", f"{med(tool, scheme, 1):.2f} s"]
    print(f"| {tool} | " + " | ".join(cells) + " |")
print()
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
      for tool in imagecache curl wget2; do measure "$1" $tool $scheme "$3"; done
    done
  done
}

echo; echo "== cold, written to tmpfs"
series "$WORK/tmpfs.results" "$RUNS" "$WORK/out"
table "$WORK/tmpfs.results" "$RUNS" "On tmpfs"

echo; echo "== cold, written to disk ($DISK_OUT; noisy, see README)"
series "$WORK/disk.results" "$DISK_RUNS" "$DISK_OUT"
table "$WORK/disk.results" "$DISK_RUNS" "On disk (ext4)"
rm -rf "$WORK/out" "$DISK_OUT"

echo; echo "== warm: $WARM URLs, every one a disk hit (tmpfs), against xargs touch -a on the same files"
WARM_MANIFEST=$WORK/warm.txt
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
for run in $(seq 3); do
  /usr/bin/time -f "imagecache (all hits): %e s, peak RSS %M KiB" \
    "$BIN" prefetch "$WARM_MANIFEST" --cache "$WORK/warm" 2>&1 >/dev/null | tail -1
  /usr/bin/time -f "xargs touch -a (floor): %e s" xargs touch -a < "$WORK/warm-files.txt" 2>&1 | tail -1
done

echo; echo "== peak memory: a $MANIFEST_LINES-line manifest (the warm URLs, repeated), all hits"
python3 - "$WARM_MANIFEST" "$MANIFEST_LINES" "$WORK/big.txt" <<'PY'
import sys
urls = open(sys.argv[1]).read().split()
with open(sys.argv[3], "w") as out:
    for i in range(int(sys.argv[2])):
        out.write(urls[i % len(urls)] + "\n")
PY
/usr/bin/time -f "imagecache prefetch, $MANIFEST_LINES lines: %e s, peak RSS %M KiB" \
  "$BIN" prefetch "$WORK/big.txt" --cache "$WORK/warm" 2>&1 | tail -1
