#!/usr/bin/env bash
# Sitemap benchmark (issue 14): time and peak memory of reading a sitemap at the protocol's
# limits (50,000 URLs, just under 50 MB) as a local file, gzip-compressed, and by URL from
# nginx on 127.0.0.1, and of an index of CHILDREN such sitemaps (each fetched, decompressed and
# streamed in turn), against a plain-text manifest of the same 50,000 URLs. Every URL is a cache
# miss under fromCacheOnly, so what is measured is reading the manifest, not downloading
# images. Runs on tmpfs.
#
#   bash Benchmarks/sitemap.sh                 # needs root (tmpfs, packages); CHILDREN=1000: ~15 min
#   CHILDREN=50 bash Benchmarks/sitemap.sh     # a quick run
set -euo pipefail
cd "$(dirname "$0")/.."
CHILDREN=${CHILDREN:-1000}
PORT=${PORT:-18081}
WORK=${WORK:-$PWD/Benchmarks/work/sitemap}

bash scripts/install-system-packages nginx time
source Benchmarks/common.sh
build_release

make_work 4g
mkdir -p "$WORK/www"

python3 - "$WORK" "$PORT" "$CHILDREN" <<'PY'
import sys
work, port, children = sys.argv[1], sys.argv[2], int(sys.argv[3])
caption = "x" * 800  # pads each entry so that 50,000 of them come to the protocol's 50 MB
with open(f"{work}/www/child.xml", "w") as xml, open(f"{work}/urls.txt", "w") as text:
    xml.write('<?xml version="1.0" encoding="UTF-8"?>\n'
              '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
              'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">\n')
    for i in range(50_000):
        url = f"https://cdn.example.invalid/i/{i}.jpg"
        text.write(url + "\n")
        xml.write(f"<url><loc>https://shop.example.invalid/p/{i}</loc><lastmod>2026-11-20</lastmod>"
                  f"<image:image><image:loc>{url}</image:loc><image:caption>{caption}"
                  "</image:caption></image:image></url>\n")
    xml.write("</urlset>\n")
with open(f"{work}/www/index.xml", "w") as index:
    index.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n')
    for i in range(children):
        index.write(f"<sitemap><loc>http://127.0.0.1:{port}/maps/{i}.xml.gz</loc></sitemap>\n")
    index.write("</sitemapindex>\n")
PY
gzip -k "$WORK/www/child.xml"
chmod -R a+rX "$WORK/www"
echo "child sitemap: $(stat -c %s "$WORK/www/child.xml") bytes, gzip $(stat -c %s "$WORK/www/child.xml.gz") bytes; index of $CHILDREN" >&2

start_nginx 1 256 <<CONF
  server {
    listen 127.0.0.1:$PORT;
    root $WORK/www;
    # Every child of the index is the same file under its own name.
    location ~ ^/maps/[0-9]+\.xml\.gz$ { alias $WORK/www/child.xml.gz; }
  }
CONF

measure() {  # label manifest
  rm -rf "$WORK/cache"
  /usr/bin/time -f "%e %M" -o "$WORK/usage" "$BIN" prefetch "$2" --cache "$WORK/cache" \
    --option fromCacheOnly >/dev/null 2>"$WORK/stderr" || true
  local urls
  urls=$(grep -o '[0-9]* URLs' "$WORK/stderr" | tail -1)
  local errors
  errors=$(grep -c '^skipped .*:[0-9]*: ' "$WORK/stderr" || true)
  read -r seconds kib < "$WORK/usage"
  printf '| %s | %s | %s s | %d MB | %s |\n' "$1" "$urls" "$seconds" $((kib / 1024)) "$errors"
}

echo
echo "| manifest | read | time | peak memory | errors |"
echo "| --- | --- | --- | --- | --- |"
measure "text, 50,000 lines (the bound)" "$WORK/urls.txt"
measure "sitemap, 50,000 URLs, local" "$WORK/www/child.xml"
measure "sitemap, gzip, local" "$WORK/www/child.xml.gz"
measure "sitemap, gzip, by URL" "http://127.0.0.1:$PORT/child.xml.gz"
measure "index of $CHILDREN gzip sitemaps, by URL" "http://127.0.0.1:$PORT/index.xml"
