#!/usr/bin/env bash
# Thumbnail benchmark (issue 12): COUNT JPEG photos of 12 megapixels (4000x3000) already in the
# cache, a 300x300 thumbnail of each (imageThumbnailPixelSize, preserving the aspect ratio),
# no network: imagecache renders each from the original on disk (a fromCacheOnly prefetch)
# and stores it under SD's derived key. Beside it, on the same files: vipsthumbnail (libvips,
# shrink-on-load) and ImageMagick's `mogrify -thumbnail` (which is `convert -thumbnail` over
# many files in one process). Every tool writes JPEG at quality 100, as SD's 1.0 does.
# Release build, tmpfs, RUNS alternating runs per tool, medians.
#
#   bash Benchmarks/thumbnails.sh                  # needs root (tmpfs, packages)
#   COUNT=100 RUNS=1 bash Benchmarks/thumbnails.sh # a quick run
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-1000}
RUNS=${RUNS:-3}
DISTINCT=${DISTINCT:-8}
WORK=${WORK:-$PWD/Benchmarks/work/thumbnails}

bash scripts/install-system-packages imagemagick libvips-tools
source Benchmarks/common.sh
build_release

make_work 12g
mkdir -p "$WORK/base" "$WORK/photos"

# DISTINCT different 12-megapixel photos-like images (fractal plasma, which compresses like a
# photograph), each copied under COUNT / DISTINCT names.
for i in $(seq 1 "$DISTINCT"); do
  convert -seed "$i" -size 4000x3000 plasma:fractal -blur 0x1 -quality 90 "$WORK/base/$i.jpg"
done
manifest=$WORK/manifest.jsonl
: >"$manifest"
for i in $(seq 1 "$COUNT"); do
  cp "$WORK/base/$(((i - 1) % DISTINCT + 1)).jpg" "$WORK/photos/p$i.jpg"
  printf '{"url": "https://img.example.com/p%d.jpg", "options": ["fromCacheOnly"], "context": {"imageThumbnailPixelSize": [300, 300]}}\n' "$i" >>"$manifest"
done
echo "photos: $COUNT x 4000x3000, $(du -sh "$WORK/photos" | cut -f1) in all"

# The cache: each photo under SD's file name for its URL (md5 of the key, then .jpg), hard
# links to the same bytes.
fill_cache() {
  rm -rf "$WORK/cache"
  mkdir -p "$WORK/cache/default"
  for i in $(seq 1 "$COUNT"); do
    name=$(printf '%s' "https://img.example.com/p$i.jpg" | md5sum | cut -d' ' -f1)
    ln "$WORK/photos/p$i.jpg" "$WORK/cache/default/$name.jpg"
  done
}

run_imagecache() {
  "$BIN" prefetch "$manifest" --cache "$WORK/cache" --quiet --json >"$WORK/report.json"
}
run_vips() {
  rm -rf "$WORK/out" && mkdir -p "$WORK/out"
  vipsthumbnail --size 300x300 -o "$WORK/out/%s.jpg[Q=100]" "$WORK"/photos/*.jpg
}
run_magick() {
  rm -rf "$WORK/out" && mkdir -p "$WORK/out"
  mogrify -path "$WORK/out" -thumbnail 300x300 -quality 100 "$WORK"/photos/*.jpg
}

seconds() { # runs "$@", prints the wall time in seconds
  local start end
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

declare -A times
for run in $(seq 1 "$RUNS"); do
  fill_cache
  times[imagecache]+="$(seconds run_imagecache) "
  derived=$(python3 -c "import json; print(json.load(open('$WORK/report.json'))['prefetch']['derived'])")
  [ "$derived" -eq "$COUNT" ] || { echo "imagecache made $derived variants, not $COUNT" >&2; exit 1; }
  times[vipsthumbnail]+="$(seconds run_vips) "
  times[imagemagick]+="$(seconds run_magick) "
  echo "run $run of $RUNS done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
ic=$(echo "${times[imagecache]}" | median)
echo
echo "| tool | median of $RUNS (s) | per image (ms) | vs imagecache |"
echo "| --- | --- | --- | --- |"
for tool in imagecache vipsthumbnail imagemagick; do
  m=$(echo "${times[$tool]}" | median)
  printf '| %s | %.2f | %.1f | %.2fx |\n' "$tool" "$m" "$(echo "$m * 1000 / $COUNT" | bc -l)" \
    "$(echo "$m / $ic" | bc -l)"
done
echo "(runs: imagecache ${times[imagecache]}; vipsthumbnail ${times[vipsthumbnail]}; imagemagick ${times[imagemagick]})"
