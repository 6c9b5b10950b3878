#!/usr/bin/env bash
# Times `imagecache verify` (issue 45) on a cache of SD 5 names against the per-format checkers
# an administrator would run over the same files: `jpeginfo -c` on the JPEGs, `pngcheck -q` on
# the PNGs, `gifsicle --info` on the GIFs and `webpinfo` on the WebPs, each through xargs in
# batches, as many at once as verify's --jobs. Runs alternate (checkers, header, structure,
# checkers, ...); medians, files per second and peak RSS are reported. Then detection: 1% of the
# files are damaged in known ways, listed in a manifest, and each tool's bad list is compared
# with it, kind by kind, with the false positives among the valid files; the damaged files
# `full` passed are given to reference decoders (ImageMagick, djpeg -strict), which say whether
# any of that damage could have been found.
#
#   bash Benchmarks/verify.sh                  # 20,000 then 100,000 files, tmpfs (root)
#   N=20000 bash Benchmarks/verify.sh          # one size, quicker
#   BIG=1000000 bash Benchmarks/verify.sh      # also verify's peak memory at 1,000,000 files
#   BASELINE=/tmp/before/imagecache N=20000 RUNS=3 bash Benchmarks/verify.sh
#
# BASELINE (an earlier build of imagecache) adds its `verify --level full` as a tool of its own,
# "baseline", timed in the same alternation and checked for detection: before and after a
# change in one series.
#
# The cache grows from one size to the next (file i is the same at every size). The files are
# made from a few sources written once with Pillow: JPEG baseline and progressive, PNG with and
# without alpha, APNG, animated GIF, WebP lossy and lossless, thumbnails (120x120 to 400x300)
# and photos (1024x768); every JPEG, PNG and GIF copy carries its own comment (a COM segment, a
# tEXt chunk, a comment extension), so no two of them are the same bytes (WebP's are copies). BIG's files past the largest
# size are hard links to those (only verify's memory is measured there).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-${N:-20000 100000}}
RUNS=${RUNS:-5}
JOBS=${JOBS:-$(nproc)}
# The levels timed and checked: full decodes every JPEG and PNG, as jpeginfo -c and pngcheck do,
# and every frame of each GIF and WebP (which gifsicle --info and webpinfo do not).
LEVELS=${LEVELS:-header structure full}
BIG=${BIG:-}
BASELINE=${BASELINE:-}
TOOLS="$LEVELS${BASELINE:+ baseline}" # what is timed and checked besides the checkers
WORK=${WORK:-$(mktemp -d /tmp/vbench-XXXXXX)}

bash scripts/install-system-packages time python3-pil jpeginfo pngcheck gifsicle webp imagemagick \
  libjpeg-turbo-progs
source Benchmarks/common.sh
build_release

make_work 8g
DIR=$WORK/cache/default
mkdir -p "$DIR" "$WORK/out"
export WORK DIR # for the checkers, timed in a shell of their own
MANIFEST=$WORK/damage.tsv # name, kind, format, detail: one line per damaged file

# Adds files until the cache holds $1: file i's source, comment and damage come from i alone.
# Debian's python3 (Pillow is its python3-pil), whatever python3 is first on the PATH.
grow_cache() {
  echo "growing the cache to $1 files in $DIR ..." >&2
  /usr/bin/python3 - "$DIR" "$1" "$MANIFEST" <<'PY'
import hashlib, io, os, random, struct, sys, zlib
from PIL import Image, ImageDraw, ImageFilter

root, count, manifest = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def picture(w, h, seed, mode="RGB"):
    """Something that compresses like a photograph: noise, gradients, shapes, a blur."""
    rng = random.Random(seed)
    noise = Image.effect_noise((w, h), 40 + seed % 30)
    grad = Image.linear_gradient("L").resize((w, h)).rotate(seed * 37 % 360)
    radial = Image.radial_gradient("L").resize((w, h))
    im = Image.merge("RGB", (noise, grad, radial))
    draw = ImageDraw.Draw(im)
    for _ in range(12):
        x, y = rng.randrange(w), rng.randrange(h)
        r = rng.randrange(4, max(5, w // 4))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=tuple(rng.randrange(256) for _ in range(3)))
    im = im.filter(ImageFilter.GaussianBlur(1.2))
    if mode == "RGBA":
        im.putalpha(Image.radial_gradient("L").resize((w, h)))
    return im

def encode(im, fmt, **kw):
    out = io.BytesIO()
    im.save(out, fmt, **kw)
    return out.getvalue()

def frames(w, h, seed, n):
    return [picture(w, h, seed + k).convert("P", palette=Image.ADAPTIVE) for k in range(n)]

# (weight, label, extension, bytes): JPEG two thirds, PNG a fifth, then GIF and WebP.
SOURCES = []
def source(weight, label, ext, data):
    SOURCES.append((weight, label, ext, data))
for k, (w, h) in enumerate([(120, 120), (240, 180), (400, 300), (1024, 768)]):
    source([20, 14, 8, 3][k], f"jpeg-baseline-{w}x{h}", "jpg", encode(picture(w, h, k), "JPEG", quality=85))
for k, (w, h) in enumerate([(240, 180), (400, 300), (1024, 768)]):
    source([10, 8, 2][k], f"jpeg-progressive-{w}x{h}", "jpg",
           encode(picture(w, h, 10 + k), "JPEG", quality=80, progressive=True))
for k, (w, h) in enumerate([(120, 120), (400, 300)]):
    source(5, f"png-rgb-{w}x{h}", "png", encode(picture(w, h, 20 + k), "PNG"))
for k, (w, h) in enumerate([(120, 120), (240, 180)]):
    source(4, f"png-rgba-{w}x{h}", "png", encode(picture(w, h, 30 + k, "RGBA"), "PNG"))
apng = [picture(120, 120, 40 + k, "RGBA") for k in range(4)]
source(2, "apng-120x120", "png", encode(apng[0], "PNG", save_all=True, append_images=apng[1:], duration=100, loop=0))
for k, (w, h, n) in enumerate([(120, 120, 4), (240, 180, 8)]):
    fs = frames(w, h, 50 + k * 10, n)
    source([4, 3][k], f"gif-animated-{w}x{h}", "gif",
           encode(fs[0], "GIF", save_all=True, append_images=fs[1:], duration=80, loop=0))
source(5, "webp-lossy-400x300", "webp", encode(picture(400, 300, 60), "WEBP", quality=80))
source(3, "webp-lossless-120x120", "webp", encode(picture(120, 120, 61, "RGBA"), "WEBP", lossless=True))

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

def with_comment(ext, data, text):
    """The source with a comment of its own, where each format keeps one."""
    if ext == "jpg":
        return data[:2] + b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text + data[2:]
    if ext == "png":
        return data[:33] + chunk(b"tEXt", b"Comment\0" + text) + data[33:]
    if ext == "gif":
        flags = data[10]
        at = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
        return data[:at] + b"\x21\xfe" + bytes([len(text)]) + text + b"\0" + data[at:]
    return data

def jpeg_scan(data):
    """The first scan's entropy-coded data: from after the SOS header to the EOI."""
    at = 2
    while data[at + 1] != 0xDA:
        at += 2 + struct.unpack(">H", data[at + 2 : at + 4])[0]
    return at + 2 + struct.unpack(">H", data[at + 2 : at + 4])[0], len(data) - 2

def header_end(ext, data):
    if ext == "jpg":
        return jpeg_scan(data)[0]
    return {"png": 33, "gif": 13, "webp": 30}[ext]

HTML = (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body>"
        b"<center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n")
KINDS = ["truncated", "header-flip", "data-flip", "empty", "zero-filled", "zero-block",
         "html", "png-crc"]

def damage(kind, ext, data, rng, comment):
    """The damaged bytes and what was done, for the manifest; `comment`: the bytes of our
    comment after the JPEG's SOI, which a header flip leaves alone."""
    b = bytearray(data)
    if kind == "truncated":
        cut = rng.randrange(1, len(b))
        return bytes(b[:cut]), f"cut at {cut} of {len(b)}"
    if kind == "header-flip":
        at = rng.randrange(0, header_end(ext, data) - comment)
        at += comment if at >= 2 else 0
        b[at] ^= rng.randrange(1, 256)
        return bytes(b), f"byte {at}"
    if kind == "data-flip":
        # One byte of the compressed data; in a JPEG's scan neither the byte nor its
        # neighbours may be, or become, 0xFF (a marker would show the damage by accident).
        lo, hi = jpeg_scan(data) if ext == "jpg" else (header_end(ext, data), len(b) - 16)
        while True:
            at = rng.randrange(lo + (hi - lo) // 4, hi - 1)
            new = b[at] ^ rng.randrange(1, 256)
            if ext != "jpg" or 0xFF not in (b[at - 1], b[at], b[at + 1], new):
                b[at] = new
                return bytes(b), f"byte {at}"
    if kind == "empty":
        return b"", "0 bytes"
    if kind == "zero-filled":
        return bytes(len(b)), f"{len(b)} zero bytes"
    if kind == "zero-block":
        at = len(b) // 2 // 4096 * 4096
        b[at : at + 4096] = bytes(min(4096, len(b) - at))
        return bytes(b), f"4 KiB zeroed at {at}"
    if kind == "html":
        return HTML, "an nginx 502 page"
    if kind == "png-crc":
        at = data.index(b"IDAT") - 4
        end = at + 8 + struct.unpack(">I", data[at : at + 4])[0]
        b[end] ^= 0xFF
        return bytes(b), f"IDAT CRC at {end}"

def suits(kind, ext, data):
    if kind == "png-crc":
        return ext == "png"
    if kind == "zero-block":
        return len(data) >= 12288
    return True

weights = [s[0] for s in SOURCES]
existing = sum(not n.startswith('.') for n in os.listdir(root))
with open(manifest, "a") as out:
    for i in range(existing, count):
        rng = random.Random(i)
        damaged = i % 100 == 50
        kind = KINDS[i // 100 % len(KINDS)] if damaged else None
        pool = [s for s in SOURCES if not damaged or suits(kind, s[2], s[3])]
        _, label, ext, data = rng.choices(pool, weights=[s[0] for s in pool])[0]
        name = hashlib.md5(f"https://img.example.com/bench/{i}.{ext}".encode()).hexdigest() + "." + ext
        text = f"imagecache verify benchmark, file {i}".encode()
        data = with_comment(ext, data, text)
        if damaged:
            data, detail = damage(kind, ext, data, rng, 4 + len(text) if ext == "jpg" else 0)
            out.write(f"{name}\t{kind}\t{label}\t{detail}\n")
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
PY
}

# Each checker over its format's files, in batches of 500 names, JOBS batches at once.
checkers() { # $1: xargs's -P
  (
    cd "$DIR"
    xargs -a "$WORK/jpg.list" -n 500 -P "$1" jpeginfo -c || true
    xargs -a "$WORK/png.list" -n 500 -P "$1" pngcheck -q || true
    xargs -a "$WORK/gif.list" -n 500 -P "$1" gifsicle --info || true
    xargs -a "$WORK/webp.list" -n 500 -P "$1" webpinfo || true
  )
}
# CMD: the command line of a tool, a level of this build or baseline (the earlier build's full).
tool_command() { # tool
  if [ "$1" = baseline ]; then CMD=("$BASELINE" verify --level full); else CMD=("$BIN" verify --level "$1"); fi
  CMD+=(--cache "$WORK/cache" --jobs "$JOBS")
}
verify() { # tool, more arguments
  tool_command "$1"
  shift
  "${CMD[@]}" "$@" || [ $? = 1 ]
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
measure() { # label, command...: appends "seconds user system kib" to $WORK/<label>
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/last" "$@" >/dev/null 2>&1 || true # bad files: 1
  tail -n1 "$WORK/last" >>"$WORK/$label" # after "Command exited with non-zero status 1"
}
column_median() { cut -d' ' -f"$2" "$WORK/$1" | median; }
cpu_median() { awk '{print $2 + $3}' "$WORK/$1" | median; }

# The files each tool called bad (one name a line), from one run writing its output: the
# checkers one batch at a time, so that their lines do not interleave.
bad_lists() {
  local level
  for level in $TOOLS; do
    verify "$level" --report "$WORK/out/$level.json" 2>/dev/null
    python3 -c "
import json, sys
for f in json.load(open(sys.argv[1]))['verify']['files']:
    if f['outcome'] == 'bad': print(f['name'])" "$WORK/out/$level.json" >"$WORK/out/$level.bad"
  done
  checkers 1 >"$WORK/out/checkers.txt" 2>"$WORK/out/checkers.err" # apart: stdout is buffered
  # jpeginfo: "<name> ... OK|WARNING|ERROR"; pngcheck -q: "ERROR: <name>"; gifsicle:
  # "gifsicle:<name>: <message>" (a warning too); webpinfo: "File: <name>", then "Errors
  # detected.", or "Failed to open input file <name>."
  python3 - "$WORK/out/checkers.txt" "$WORK/out/checkers.err" >"$WORK/out/checkers.bad" <<'PY'
import re, sys
bad, current = set(), None
lines = [line for path in sys.argv[1:] for line in open(path, errors="replace")]
for line in lines:
    if m := re.match(r"(\S+\.jpg)\s.*\s(WARNING|ERROR)\s", line + " "):
        bad.add(m[1])
    elif m := re.match(r"ERROR: (\S+\.png)", line):
        bad.add(m[1])
    elif m := re.match(r"gifsicle:(\S+\.gif):", line):
        bad.add(m[1])
    elif m := re.match(r"Failed to open input file (\S+?\.webp)", line):
        bad.add(m[1])
    elif m := re.match(r"File: (\S+\.webp)", line):
        current = m[1]
    elif line.startswith("Errors detected") and current:
        bad.add(current)
print("\n".join(sorted(bad)))
PY
}

# Found / injected per damage kind, and false positives among the valid files, for each tool.
detection_table() { # files
  python3 - "$MANIFEST" "$1" "$WORK/out" "$TOOLS" <<'PY'
import collections, sys
manifest, files, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
damaged = {}
for line in open(manifest):
    name, kind, label, _ = line.rstrip("\n").split("\t")
    damaged[name] = (kind, label)
tools = [(t, f"verify {t}") for t in sys.argv[4].split()] + [("checkers", "checkers")]
bad = {t: set(open(f"{out}/{t}.bad").read().split()) for t, _ in tools}
kinds = collections.Counter(k for k, _ in damaged.values())
print(f"\ndetection at {files} files ({len(damaged)} damaged): found / injected")
print("| damage | injected | " + " | ".join(l for _, l in tools) + " |")
print("|---|---|" + "---|" * len(tools))
def row(label, injected, found):
    print(f"| {label} | {injected} | " + " | ".join(str(found(t)) for t, _ in tools) + " |")
for kind in dict.fromkeys(k for k, _ in damaged.values()):  # the kinds, in the manifest's order
    names = [n for n, (k, _) in damaged.items() if k == kind]
    row(kind, len(names), lambda t: sum(n in bad[t] for n in names))
row("all", len(damaged), lambda t: len(bad[t] & damaged.keys()))
row(f"false positives (of {files - len(damaged)} valid)", "", lambda t: len(bad[t] - damaged.keys()))
# What each kind went unseen in, by source, for the notes.
for t, label in tools:
    missed = collections.Counter(
        f"{k} {s.rsplit('-', 1)[0]}" for n, (k, s) in damaged.items() if n not in bad[t])
    if missed:
        print(f"{label} missed: " + ", ".join(f"{k} ({c})" for k, c in sorted(missed.items())))
PY
}

# The damaged files `verify --level full` passed, each given to reference decoders that decode
# every pixel of every frame and take a warning for an error: ImageMagick's `convert
# -regard-warnings` (libjpeg, libpng, giflib's reading, libwebp) and, for a JPEG, `djpeg -strict`
# at full size. A file one of them refuses is damage that `full` should have found; the rest
# decode, their damage only in what the pixels show (JPEG and GIF have no checksum).
reference_check() {
  [ -f "$WORK/out/full.bad" ] || return 0
  local name missed=0 refused=0
  while IFS=$'\t' read -r name _; do
    grep -qxF "$name" "$WORK/out/full.bad" && continue
    missed=$((missed + 1))
    if ! /usr/bin/convert -regard-warnings "$DIR/$name" null: >/dev/null 2>&1 ||
      { [[ $name == *.jpg ]] && ! djpeg -strict "$DIR/$name" >/dev/null 2>&1; }; then
      echo "refused by a reference decoder, passed by verify full: $name" >&2
      refused=$((refused + 1))
    fi
  done <"$MANIFEST"
  echo "damaged files verify full passed: $missed; of them refused by ImageMagick" \
    "(-regard-warnings) or djpeg -strict: $refused" >&2
}

rows=()
for FILES in $SIZES; do
  grow_cache "$FILES"
  for ext in jpg png gif webp; do (cd "$DIR" && find . -maxdepth 1 -name "*.$ext" -printf '%f\n') >"$WORK/$ext.list"; done
  echo "$FILES files: $(wc -l <"$WORK/jpg.list") JPEG, $(wc -l <"$WORK/png.list") PNG," \
    "$(wc -l <"$WORK/gif.list") GIF, $(wc -l <"$WORK/webp.list") WebP; $(du -sh "$DIR" | cut -f1)" >&2
  rm -f "$WORK/checkers" "$WORK/header" "$WORK/structure" "$WORK/full" "$WORK/baseline"
  verify structure >/dev/null 2>&1 # warm the dentry cache
  for run in $(seq "$RUNS"); do
    measure checkers bash -c "$(declare -f checkers); checkers $JOBS"
    for level in $TOOLS; do
      tool_command "$level"
      measure "$level" "${CMD[@]}"
    done
    echo "run $run of $RUNS: $(cd "$WORK" && tail -qn1 checkers $TOOLS | cut -d' ' -f1 | paste -sd' ')" >&2
  done
  base=$(column_median checkers 1)
  base_cpu=$(cpu_median checkers)
  for label in checkers $TOOLS; do
    s=$(column_median "$label" 1)
    cpu=$(cpu_median "$label")
    rows+=("$(printf '| %s | %s | %.3f s | %.0f | %.2f s | %.1f | %.1f | %.1f MiB |' "$FILES" "$label" \
      "$s" "$(echo "$FILES / $s" | bc -l)" "$cpu" "$(echo "$base / $s" | bc -l)" \
      "$(echo "$base_cpu / $cpu" | bc -l)" "$(echo "$(column_median "$label" 4) / 1024" | bc -l)")")
  done
  printf '%s\n' "${rows[@]: -$((1 + $(wc -w <<<"$TOOLS")))}" >&2 # this size's, as it comes
  bad_lists
  detection_table "$FILES"
  reference_check
done

echo
echo "tmpfs, --jobs $JOBS (checkers: xargs -P $JOBS), medians of $RUNS alternating runs"
echo "| files | tool | wall | files/s | CPU (user + sys) | checkers/tool, wall | checkers/tool, CPU | peak RSS |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"

if [ -n "$BIG" ]; then
  largest=$(ls "$DIR" | wc -l)
  echo "adding hard links up to $BIG files ..." >&2
  python3 - "$DIR" "$largest" "$BIG" <<'PY'
import hashlib, os, sys
root, largest, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = sorted(n for n in os.listdir(root) if not n.startswith('.'))
for i in range(largest, big):
    name = hashlib.md5(f"https://img.example.com/bench/link/{i}".encode()).hexdigest()
    source = names[i % largest]
    os.link(os.path.join(root, source), os.path.join(root, name + source[32:]))
PY
  for level in $LEVELS; do
    { /usr/bin/time -f "$BIG files, verify $level: %e s, peak RSS %M KiB" "$BIN" verify --cache "$WORK/cache" \
      --level "$level" --jobs "$JOBS" --report "$WORK/out/big.json" 2>&1 >/dev/null || true; } | tail -1
  done
fi
