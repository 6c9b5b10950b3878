#!/usr/bin/env bash
# Prefetch benchmark (issue 5): imagecache against wget2, curl and aria2c fetching the same
# images from nginx on 127.0.0.1, then a warm run (all hits) against `xargs touch -a`, then
# the peak memory of a 1,000,000-line manifest.
#
#   bash Benchmarks/prefetch.sh                      # 2,000 images, 100,000 warm URLs
#   IMAGES=500 WARM=20000 MANIFEST_LINES=200000 bash Benchmarks/prefetch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${IMAGES:-2000}
WARM=${WARM:-100000}
MANIFEST_LINES=${MANIFEST_LINES:-1000000}
RUNS=${RUNS:-3}
PORT=${PORT:-18080}
WORK=${WORK:-$PWD/Benchmarks/work/prefetch}

bash scripts/install-system-packages nginx wget2 aria2 hyperfine curl time
swift build -c release --product imagecache >/dev/null
BIN=$PWD/.build/release/imagecache

rm -rf "$WORK"; mkdir -p "$WORK/www/img" "$WORK/nginx"
echo "generating $IMAGES JPEGs of 2-64 KiB ..." >&2
python3 - "$WORK/www/img" "$IMAGES" Tests/Fixtures/photo.jpg <<'PY'
import os, random, sys
root, count, base = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read()
rng = random.Random(7)
for i in range(count):
    target = rng.randint(2048, 65536)
    padding = b""
    while len(base) + len(padding) < target:  # COM segments pad a valid JPEG to size
        n = min(65533, target - len(base) - len(padding))
        n = max(n, 1)
        padding += b"\xff\xfe" + (n + 2).to_bytes(2, "big") + os.urandom(n)
    open(os.path.join(root, f"{i}.jpg"), "wb").write(base[:2] + padding + base[2:])
PY

cat > "$WORK/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000;
  client_body_temp_path $WORK/nginx/tmp;
  proxy_temp_path $WORK/nginx/tmp;
  fastcgi_temp_path $WORK/nginx/tmp;
  uwsgi_temp_path $WORK/nginx/tmp;
  scgi_temp_path $WORK/nginx/tmp;
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    root $WORK/www;
  }
}
CONF
mkdir -p "$WORK/nginx/tmp"
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx"
trap 'kill $(cat "$WORK/nginx/nginx.pid") 2>/dev/null || true' EXIT
sleep 0.5

MANIFEST=$WORK/urls.txt
for i in $(seq 0 $((IMAGES - 1))); do echo "http://127.0.0.1:$PORT/img/$i.jpg"; done > "$MANIFEST"
sed 's/^\(.*\)$/url = "\1"/' "$MANIFEST" > "$WORK/urls.curl"

echo; echo "== cold: $IMAGES images, 64 at once, $RUNS runs each (release builds, nginx on loopback)"
hyperfine --runs "$RUNS" --export-markdown "$WORK/cold.md" \
  --prepare "rm -rf '$WORK/out' && mkdir -p '$WORK/out'" \
  -n "imagecache" "$BIN prefetch '$MANIFEST' --cache '$WORK/out' --concurrency 64 --per-host-concurrency 64 2>/dev/null" \
  -n "wget2 --max-threads=64" "wget2 --max-threads=64 -q -nc -P '$WORK/out' -i '$MANIFEST'" \
  -n "curl --parallel-max 64" "curl -s --parallel --parallel-max 64 --remote-name-all --output-dir '$WORK/out' -K '$WORK/urls.curl'" \
  -n "aria2c -j 64" "aria2c -q -j 64 -x 16 --max-connection-per-server=16 --auto-file-renaming=false -d '$WORK/out' -i '$MANIFEST'"
cat "$WORK/cold.md"

echo; echo "== warm: $WARM URLs, every one a disk hit, against xargs touch -a on the same files"
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
hyperfine --warmup 1 --runs "$RUNS" --export-markdown "$WORK/warm.md" \
  -n "imagecache (all hits)" "$BIN prefetch '$WARM_MANIFEST' --cache '$WORK/warm' 2>/dev/null" \
  -n "xargs touch -a (floor)" "xargs touch -a < '$WORK/warm-files.txt'"
cat "$WORK/warm.md"

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
rm -rf "$WORK/out" "$WORK/warm" "$WORK/www"
