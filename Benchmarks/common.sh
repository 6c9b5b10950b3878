# Sourced by the benchmark scripts (from the repository's root): the binary as scripts/install
# builds it, and a work folder that is removed, with anything mounted or started in it, on exit.

# Builds the release binary (Swift runtime linked statically, as installed) and sets BIN.
build_release() {
  swift build -c release --static-swift-stdlib --product imagecache >/dev/null
  BIN=$PWD/.build/release/imagecache
}

# Creates $WORK, on a tmpfs of size $1 unless $1 is empty, with $WORK/tmp as TMPDIR; sets the
# EXIT trap that stops an nginx started with its pid in $WORK/nginx, unmounts and removes
# $WORK and any further paths given.
make_work() {
  local size=$1
  shift
  WORK_EXTRA=("$@")
  trap remove_work EXIT
  mkdir -p "$WORK"
  if [ -n "$size" ]; then mount -t tmpfs -o "size=$size,mode=755" tmpfs "$WORK"; fi
  mkdir -p "$WORK/tmp"
  export TMPDIR=$WORK/tmp
}

# Starts nginx from $WORK/nginx (its pid, log and temporary files there, so that remove_work
# stops it) serving $WORK/www: $1 worker processes of $2 connections each, and stdin is the
# rest of the http block (its server blocks). Its workers run as nobody: make $WORK/www
# world-readable first. Optional: NGINX_MAIN, lines for the main context before the rest (e.g.
# load_module); NGINX_CPUS, a CPU list that nginx and its workers are pinned to (taskset -c).
start_nginx() {
  mkdir -p "$WORK/nginx/tmp"
  {
    if [ -n "${NGINX_MAIN:-}" ]; then echo "$NGINX_MAIN"; fi
    cat <<CONF
worker_processes $1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections $2; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path $WORK/nginx/tmp;
  proxy_temp_path $WORK/nginx/tmp;
  fastcgi_temp_path $WORK/nginx/tmp;
  uwsgi_temp_path $WORK/nginx/tmp;
  scgi_temp_path $WORK/nginx/tmp;
CONF
    cat
    echo "}"
  } > "$WORK/nginx/nginx.conf"
  local pin=()
  if [ -n "${NGINX_CPUS:-}" ]; then pin=(taskset -c "$NGINX_CPUS"); fi
  "${pin[@]}" nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx"
  sleep 0.5
}

# Stops the nginx start_nginx started and waits (up to 10 s) until it has exited, so that
# another can listen on its ports.
stop_nginx() {
  [ -f "$WORK/nginx/nginx.pid" ] || return 0
  local pid
  pid=$(cat "$WORK/nginx/nginx.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$WORK/nginx/nginx.pid"
}

remove_work() {
  stop_nginx
  if mountpoint -q "$WORK"; then umount "$WORK"; fi
  rm -rf "$WORK" "${WORK_EXTRA[@]}"
}

# COUNT JPEGs of 2-40 KiB in DIR (0.jpg, 1.jpg...: the fixture photo padded with COM segments
# to a size drawn from a fixed seed, so every series serves the same files), readable by nginx's
# workers, which run as nobody.
generate_jpegs() {  # dir count
  echo "generating $2 JPEGs of 2-40 KiB ..." >&2
  python3 - "$1" "$2" Tests/Fixtures/photo.jpg <<'PY'
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
  chmod -R a+rX "$1"
}
