#!/usr/bin/env bash
# Runs the bundled example end to end with no internet: serves jobs/images on 127.0.0.1:18089,
# runs jobs/example.yaml twice (the second run is all cache hits) and prints the report summary.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${IMAGECACHE:-.build/release/imagecache}
[ -x "$BIN" ] || swift build -c release --product imagecache --static-swift-stdlib
python3 jobs/serve.py jobs 18089 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', 18089), 0.2)" 2>/dev/null && break
  sleep 0.1
done

echo "== first run: downloads" >&2
"$BIN" run jobs/example.yaml
echo >&2; echo "== second run: all hits" >&2
"$BIN" run jobs/example.yaml --json > jobs/work/last-report.json
python3 - jobs/work/last-report.json <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
p = report["prefetch"]
print(f"\nreport summary ({report['job']}, {report['status']}): {p['total']} URLs, "
      f"{p['diskHits'] + p['memoryHits']} hits, {p['downloaded']} downloaded, {p['failed']} failed; "
      + ", ".join(f"{m['pass']}: {m['filesRemoved']} removed, {m['filesMoved']} moved" for m in report["maintenance"]))
print(f"cache: {report['cache']['path']}/{report['cache']['namespace']}")
PY
