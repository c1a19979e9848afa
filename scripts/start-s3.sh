#!/usr/bin/env bash
# Starts an S3-protocol test server on 127.0.0.1 and leaves it running: moto's server mode, or
# with HAWSER_S3_SERVER=s3s-fs the s3s-fs server, which checks every request's SigV4 signature
# (access key and secret `testing`).
#
# Usage: scripts/start-s3.sh [PORT]
#   PORT               port to listen on (default: a free port)
#   HAWSER_S3_SERVER   `moto` (default) or `s3s-fs`
#   HAWSER_S3_ROOT     s3s-fs only: the directory its buckets live in, one directory each
#                      (default: a new temporary directory)
#   HAWSER_S3_PIDFILE  file to write the server's pid to (default: the pid is printed on stderr)
#   HAWSER_S3_LOG      server log file (default: a file under ${TMPDIR:-/tmp})
#
# Prints the endpoint URL (http://127.0.0.1:PORT) on stdout once the server answers.
# Installs moto with `python3 -m pip install 'moto[server]'` when moto_server is not on PATH, and
# s3s-fs 0.14.1 with `cargo install` (scripts/install-s3s-fs.sh) when it is not.
# Stop it with: kill "$(cat "$HAWSER_S3_PIDFILE")"
set -euo pipefail

port="${1:-}"
log="${HAWSER_S3_LOG:-$(mktemp "${TMPDIR:-/tmp}/hawser-s3.XXXXXX.log")}"

server=()
case "${HAWSER_S3_SERVER:-moto}" in
moto)
    if command -v moto_server >/dev/null 2>&1; then
        server=(moto_server)
    elif python3 -c 'import moto.server' >/dev/null 2>&1; then
        server=(python3 -m moto.server)
    else
        echo "moto_server not found; installing moto[server] with pip" >&2
        python3 -m pip install --quiet 'moto[server]' >&2
        server=(python3 -m moto.server)
    fi
    ;;
s3s-fs)
    s3s="$("$(dirname "$0")/install-s3s-fs.sh")"
    root="${HAWSER_S3_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/hawser-s3s.XXXXXX")}"
    mkdir -p "$root"
    server=("$s3s" --access-key testing --secret-key testing)
    ;;
*)
    echo "HAWSER_S3_SERVER must be moto or s3s-fs, not ${HAWSER_S3_SERVER}" >&2
    exit 2
    ;;
esac

if [ -z "$port" ]; then
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
fi

# setsid + redirections: the server keeps none of the caller's terminal or pipes.
if [ "${HAWSER_S3_SERVER:-moto}" = s3s-fs ]; then
    setsid "${server[@]}" --host 127.0.0.1 --port "$port" "$root" </dev/null >"$log" 2>&1 &
else
    setsid "${server[@]}" -H 127.0.0.1 -p "$port" </dev/null >"$log" 2>&1 &
fi
pid=$!

endpoint="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "the S3 test server exited during start-up; its log ($log):" >&2
        cat "$log" >&2
        exit 1
    fi
    # Any HTTP answer means it is up (s3s-fs answers an unsigned request with 403).
    if curl -s -o /dev/null --max-time 1 "$endpoint/"; then
        if [ -n "${HAWSER_S3_PIDFILE:-}" ]; then
            echo "$pid" >"$HAWSER_S3_PIDFILE"
        else
            echo "S3 test server pid: $pid (log: $log)" >&2
        fi
        echo "$endpoint"
        exit 0
    fi
    sleep 0.2
done
echo "the S3 test server did not answer on $endpoint within 20 s; its log ($log):" >&2
cat "$log" >&2
kill "$pid" 2>/dev/null || true
exit 1
