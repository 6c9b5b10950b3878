#!/usr/bin/env bash
# Times `imagecache maintain` (expire + trim) on a cache of many small files against the floor
# of one walk and one sort: `find DIR -type f -printf '%A@ %b %p\n' | sort -n`.
#
#   bash Benchmarks/maintain.sh            # 1,000,000 files
#   FILES=100000 bash Benchmarks/maintain.sh
#
# Needs hyperfine and GNU time: installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${FILES:-1000000}
RUNS=${RUNS:-3}
WORK=${WORK:-$PWD/Benchmarks/work/maintain}

bash scripts/install-system-packages hyperfine time
swift build -c release --product imagecache >/dev/null
BIN=$PWD/.build/release/imagecache

make_cache() {  # a flat cache of $FILES files of 1-8 KiB with spread access times
  rm -rf "$WORK"; mkdir -p "$WORK/cache/default"
  python3 - "$WORK/cache/default" "$FILES" <<'PY'
import os, random, sys, hashlib
root, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
now = 1_700_000_000
payload = bytes(8192)
for i in range(count):
    name = hashlib.md5(f"https://example.com/{i}.jpg".encode()).hexdigest() + ".jpg"
    path = os.path.join(root, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, payload[: rng.randint(1024, 8192)])
    os.close(fd)
    t = now - rng.randint(0, 60 * 86400)
    os.utime(path, (t, t))
PY
}

echo "building a cache of $FILES files in $WORK ..." >&2
make_cache
DIR=$WORK/cache/default
TOTAL=$(du -s --block-size=1 "$DIR" | cut -f1)
# Expire what is older than 30 days (about half), then trim what is left (above a quarter of the
# total) to below an eighth: both passes have real work to do. Dates are in 2023, so the
# --max-age is measured from today.
AGE_DAYS=$(( ( $(date +%s) - 1700000000 ) / 86400 + 30 ))
LIMIT=$(( TOTAL / 4 ))
MAINTAIN=("$BIN" maintain --cache "$WORK/cache" --max-age "${AGE_DAYS}d" --max-size "$LIMIT")

echo; echo "== plan only (dry run) vs the floor, warm page cache, $RUNS runs each"
hyperfine --warmup 1 --runs "$RUNS" --export-markdown "$WORK/dry-run.md" \
  -n "find | sort -n (floor)" "find '$DIR' -type f -printf '%A@ %b %p\n' | sort -n > /dev/null" \
  -n "imagecache maintain --dry-run" "${MAINTAIN[*]} --dry-run 2>/dev/null"
cat "$WORK/dry-run.md"

echo; echo "== peak memory of the dry run"
/usr/bin/time -f "imagecache maintain --dry-run: %e s, peak RSS %M KiB" "${MAINTAIN[@]}" --dry-run 2>&1 >/dev/null | tail -1
/usr/bin/time -f "find | sort -n: %e s, peak RSS %M KiB" bash -c "find '$DIR' -type f -printf '%A@ %b %p\n' | sort -n > /dev/null" 2>&1 | tail -1

echo; echo "== the real pass (deletes files; timed once, then the floor on what is left)"
/usr/bin/time -f "imagecache maintain: %e s, peak RSS %M KiB" "${MAINTAIN[@]}" --report "$WORK/report.json" 2>&1 | tail -3
/usr/bin/time -f "find | sort -n on the remaining tree: %e s" bash -c "find '$DIR' -type f -printf '%A@ %b %p\n' | sort -n > /dev/null" 2>&1 | tail -1
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print({p['pass']: (p['filesRemoved'], p['bytesFreed']) for p in r['maintenance']})" "$WORK/report.json"
rm -rf "$WORK"
