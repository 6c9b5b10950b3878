#!/usr/bin/env bash
# Times `imagecache maintain --dry-run --json` (the whole plan streamed as the JSON report) on a
# cache of many small files against the floor of one walk and one sort:
# `find DIR -type f -printf '%A@ %b %p\n' | sort -n`, which prints the same facts per file.
# Runs alternate (floor, imagecache, floor, ...) and medians are reported, with peak RSS, at
# each size in turn (the cache grows from one to the next), so that memory that grows with the
# cache shows.
#
#   bash Benchmarks/maintain.sh                 # 1,000,000 then 3,000,000 files, tmpfs (root)
#   SIZES=100000 RUNS=3 bash Benchmarks/maintain.sh
#   TMPFS=0 bash Benchmarks/maintain.sh         # on the disk instead (noisy: see docs/benchmarks.md)
#
# The real pass (deletes) is timed once at the end, at the largest size. Needs GNU time:
# installed when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-${FILES:-1000000 3000000}}
RUNS=${RUNS:-5}
TMPFS=${TMPFS:-1}
WORK=${WORK:-$PWD/Benchmarks/work/maintain}

bash scripts/install-system-packages time
source Benchmarks/common.sh
build_release

# The report's temporary files live beside the cache, as on a server.
make_work "$([ "$TMPFS" = 1 ] && echo 8g)"
mkdir -p "$WORK/cache/default"

# Adds files until the cache holds $1; each file's name, size and date come from its number,
# so a grown cache is the smaller one plus more. One file in four holds 1-8 KiB and the rest
# are empty, so that 3,000,000 files fit a tmpfs in some 6 GB (pages and inodes).
grow_cache() {
  echo "growing the cache to $1 files in $WORK (tmpfs: $TMPFS) ..." >&2
  python3 - "$WORK/cache/default" "$1" <<'PY'
import hashlib, os, random, sys, time
root, count = sys.argv[1], int(sys.argv[2])
now = int(time.time())
payload = bytes(8192)
for i in range(len(os.listdir(root)), count):
    rng = random.Random(i)
    name = hashlib.md5(f"https://example.com/{i}.jpg".encode()).hexdigest() + ".jpg"
    path = os.path.join(root, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    if i % 4 == 0:
        os.write(fd, payload[: rng.randint(1024, 8192)])
    os.close(fd)
    t = now - rng.randint(0, 30 * 86400)  # access times spread over the last 30 days
    os.utime(path, (t, t))
PY
}
DIR=$WORK/cache/default
# A 7-day age (about 77% of the files expire), then a limit that the rest are over at every
# size: the trim plans to delete most of the survivors.
MAINTAIN=("$BIN" maintain --cache "$WORK/cache" --max-age 7d --max-size 256MB)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
measure() {  # label, command...: appends "seconds kib" to $WORK/<label>
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/last" "$@" >/dev/null 2>&1
  cat "$WORK/last" >>"$WORK/$label"
}

rows=()
for FILES in $SIZES; do
  grow_cache "$FILES"
  rm -f "$WORK/floor" "$WORK/imagecache"
  "${MAINTAIN[@]}" --dry-run --json >/dev/null 2>&1  # warm the page cache and the dentry cache
  for _ in $(seq "$RUNS"); do
    measure floor bash -c "find '$DIR' -type f -printf '%A@ %b %p\n' | sort -n"
    measure imagecache "${MAINTAIN[@]}" --dry-run --json
  done
  "${MAINTAIN[@]}" --dry-run --json 2>/dev/null | python3 -c "
import json, sys
r = json.load(sys.stdin)
print('$FILES files, plan: ' + ', '.join(f\"{p['pass']} {len(p['actions'])} actions\" for p in r['maintenance']))"

  floor_s=$(cut -d' ' -f1 "$WORK/floor" | median)
  ours_s=$(cut -d' ' -f1 "$WORK/imagecache" | median)
  floor_m=$(cut -d' ' -f2 "$WORK/floor" | median)
  ours_m=$(cut -d' ' -f2 "$WORK/imagecache" | median)
  rows+=("| $FILES | ${floor_s} s | $((floor_m / 1024)) MB | ${ours_s} s | $(echo "$ours_s $floor_s" | awk '{printf "%.2f", $1/$2}') | $((ours_m / 1024)) MB |")
done
echo
echo "tmpfs: $TMPFS, medians of $RUNS alternating runs; floor: find -printf | sort -n"
echo "| files | floor | floor peak RSS | imagecache maintain --dry-run --json | relative | peak RSS |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"

echo
/usr/bin/time -f "the real pass (deletes): %e s, peak RSS %M KiB" "${MAINTAIN[@]}" \
  --report "$WORK/report.json" 2>&1 | tail -1
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print({p['pass']: (p['filesRemoved'], p['bytesFreed']) for p in r['maintenance']})" "$WORK/report.json"
