#!/usr/bin/env bash
# Starts an S3-protocol test server (moto's server mode) on 127.0.0.1 and leaves it running.
#
# Usage: scripts/start-s3.sh [PORT]
#   PORT               port to listen on (default: a free port)
#   HAWSER_S3_PIDFILE  file to write the server's pid to (default: the pid is printed on stderr)
#   HAWSER_S3_LOG      server log file (default: a file under ${TMPDIR:-/tmp})
#
# Prints the endpoint URL (http://127.0.0.1:PORT) on stdout once the server answers.
# Installs moto with `python3 -m pip install 'moto[server]'` when moto_server is not on PATH.
# Stop it with: kill "$(cat "$HAWSER_S3_PIDFILE")"
set -euo pipefail

port="${1:-}"
log="${HAWSER_S3_LOG:-$(mktemp "${TMPDIR:-/tmp}/hawser-s3.XXXXXX.log")}"

server=()
if command -v moto_server >/dev/null 2>&1; then
    server=(moto_server)
elif python3 -c 'import moto.server' >/dev/null 2>&1; then
    server=(python3 -m moto.server)
else
    echo "moto_server not found; installing moto[server] with pip" >&2
    python3 -m pip install --quiet 'moto[server]' >&2
    server=(python3 -m moto.server)
fi

if [ -z "$port" ]; then
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
fi

# setsid + redirections: the server keeps none of the caller's terminal or pipes.
setsid "${server[@]}" -H 127.0.0.1 -p "$port" </dev/null >"$log" 2>&1 &
pid=$!

endpoint="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "the S3 test server exited during start-up; its log ($log):" >&2
        cat "$log" >&2
        exit 1
    fi
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$endpoint/" >/dev/null 2>&1; then
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
