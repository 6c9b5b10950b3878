#!/usr/bin/env bash
# Peak memory benchmark (issue 38): imagecache's peak resident memory (/usr/bin/time -v's
# "Maximum resident set size", the kernel's ru_maxrss) for what origins send, from nginx on
# 127.0.0.1 over HTTPS + HTTP/2 (a self-signed certificate) and over HTTP/1.1:
#
#   bombs    BOMBS (60) URLs of one origin, each a gzip-encoded body of 200 MB of zeros
#            (about 200 KB on the wire), at the defaults: each must fail as responseTooLarge
#            at the 50 MiB limit; over HTTP/2 all of them run at once as streams.
#   images   IMAGES (5,000) ordinary JPEGs (the 400x300 fixture, 14 KB), at the defaults.
#
# Memory is the question, not speed: the cache is on disk (the bombs' spill files, up to
# 50 MiB each, come and go there), and each figure is the median of RUNS (3) runs.
#
#   bash Benchmarks/memory.sh                    # needs root (packages); builds the release binary
#   BIN=.build/debug/imagecache RUNS=1 bash Benchmarks/memory.sh   # a binary already built
set -euo pipefail
cd "$(dirname "$0")/.."
BOMBS=${BOMBS:-60}
IMAGES=${IMAGES:-5000}
RUNS=${RUNS:-3}
PORT=${PORT:-18081}
TLS_PORT=${TLS_PORT:-18444}
WORK=${WORK:-$PWD/Benchmarks/work/memory}
. Benchmarks/common.sh

bash scripts/install-system-packages nginx time openssl >/dev/null
if [ -z "${BIN:-}" ]; then build_release; else BIN=$(realpath "$BIN"); fi
make_work ""
mkdir -p "$WORK/www/bomb" "$WORK/www/img"
head -c 200000000 /dev/zero | gzip -9 > "$WORK/www/bomb/0.png"
for i in $(seq 1 $((BOMBS - 1))); do ln "$WORK/www/bomb/0.png" "$WORK/www/bomb/$i.png"; done
cp Tests/Fixtures/photo-400x300.jpg "$WORK/www/img/0.jpg"
for i in $(seq 1 $((IMAGES - 1))); do ln "$WORK/www/img/0.jpg" "$WORK/www/img/$i.jpg"; done
chmod -R a+rX "$WORK/www"
mkdir -p "$WORK/nginx"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -keyout "$WORK/nginx/key.pem" -out "$WORK/nginx/cert.pem" 2>/dev/null
start_nginx 1 4096 <<CONF
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    listen 127.0.0.1:$TLS_PORT ssl http2 backlog=4096;
    ssl_certificate $WORK/nginx/cert.pem;
    ssl_certificate_key $WORK/nginx/key.pem;
    http2_max_concurrent_streams 128;
    keepalive_requests 100000;
    root $WORK/www;
    location /bomb/ { types { } default_type image/png; add_header Content-Encoding gzip; }
  }
CONF

# peak_kib BASE PATH COUNT: the median peak RSS (KiB) of prefetching COUNT URLs BASE/PATH/<i>.
peak_kib() {
  local base=$1 path=$2 count=$3 ext=$4 peaks=()
  seq 0 $((count - 1)) | sed "s|^|$base/$path/|; s|\$|.$ext|" > "$WORK/urls.txt"
  for _ in $(seq "$RUNS"); do
    rm -rf "$WORK/cache"
    /usr/bin/time -v -o "$WORK/time.txt" "$BIN" prefetch "$WORK/urls.txt" --cache "$WORK/cache" \
      --option allowInvalidSSLCertificates --report "$WORK/report.json" 2>/dev/null || true
    peaks+=("$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/time.txt")")
    python3 - "$WORK/report.json" "$count" "$path" <<'PY'
import json, sys
prefetch = json.load(open(sys.argv[1]))["prefetch"]
count, path = int(sys.argv[2]), sys.argv[3]
if path == "bomb":
    names = {f["name"] for f in prefetch["failures"]}
    assert prefetch["failed"] == count and names == {"responseTooLarge"}, (prefetch["failed"], names)
else:
    assert prefetch["downloaded"] == count, prefetch["downloaded"]
PY
  done
  printf '%s\n' "${peaks[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

echo "date: $(date -u +%F), binary: $BIN, runs: $RUNS (median), cache on disk"
echo "| case | HTTP/2 (TLS) | HTTP/1.1 |"
echo "| --- | --- | --- |"
for case in bombs images; do
  if [ "$case" = bombs ]; then set -- bomb "$BOMBS" png; else set -- img "$IMAGES" jpg; fi
  h2=$(peak_kib "https://127.0.0.1:$TLS_PORT" "$@")
  h1=$(peak_kib "http://127.0.0.1:$PORT" "$@")
  echo "| $case ($2 URLs) | $((h2 / 1024)) MiB | $((h1 / 1024)) MiB |"
done
