#!/usr/bin/env bash
# Starts a storage test server on 127.0.0.1 and leaves it running:
#   moto       moto's server mode (S3; takes any credentials)
#   s3s-fs     s3s-fs, an S3 server that checks every request's SigV4 signature (access key and
#              secret `testing`)
#   azurite    Azurite's blob service (Azure; account devstoreaccount1 with its well-known key,
#              SharedKey and SAS signatures checked), data in memory
#
# Usage: scripts/start-storage.sh SERVER [PORT]
#   PORT                    port to listen on (default: a free port)
#   HAWSER_STORAGE_ROOT     s3s-fs only: the directory its buckets live in, one directory each
#                           (default: a new temporary directory)
#   HAWSER_STORAGE_PIDFILE  file to write the server's pid to (default: printed on stderr)
#   HAWSER_STORAGE_LOG      server log file (default: a file under ${TMPDIR:-/tmp})
#
# Prints the endpoint URL on stdout once the server answers: http://127.0.0.1:PORT, for azurite
# http://127.0.0.1:PORT/devstoreaccount1 (the storageAccountURI of a location).
# Installs what is missing: moto with pip, s3s-fs with cargo (scripts/install-s3s-fs.sh), Azurite
# with npm (scripts/install-azurite.sh).
# Stop it with: kill "$(cat "$HAWSER_STORAGE_PIDFILE")"
set -euo pipefail

kind="${1:-}"
port="${2:-}"
here="$(dirname "$0")"
log="${HAWSER_STORAGE_LOG:-$(mktemp "${TMPDIR:-/tmp}/hawser-storage.XXXXXX.log")}"

if [ -z "$port" ]; then
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
fi
endpoint="http://127.0.0.1:$port"

server=()
case "$kind" in
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
    server+=(-H 127.0.0.1 -p "$port")
    ;;
s3s-fs)
    root="${HAWSER_STORAGE_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/hawser-s3s.XXXXXX")}"
    mkdir -p "$root"
    server=("$("$here/install-s3s-fs.sh")" --access-key testing --secret-key testing
        --host 127.0.0.1 --port "$port" "$root")
    ;;
azurite)
    server=("$("$here/install-azurite.sh")" --blobHost 127.0.0.1
        --blobPort "$port" --inMemoryPersistence --disableTelemetry)
    endpoint="$endpoint/devstoreaccount1"
    ;;
*)
    echo "usage: $0 moto|s3s-fs|azurite [PORT]" >&2
    exit 2
    ;;
esac

# setsid + redirections: the server keeps none of the caller's terminal or pipes.
setsid "${server[@]}" </dev/null >"$log" 2>&1 &
pid=$!

for _ in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "the $kind test server exited during start-up; its log ($log):" >&2
        cat "$log" >&2
        exit 1
    fi
    # Any HTTP answer means it is up (s3s-fs answers an unsigned request with 403, Azurite 400).
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
        if [ -n "${HAWSER_STORAGE_PIDFILE:-}" ]; then
            echo "$pid" >"$HAWSER_STORAGE_PIDFILE"
        else
            echo "$kind test server pid: $pid (log: $log)" >&2
        fi
        echo "$endpoint"
        exit 0
    fi
    sleep 0.2
done
echo "the $kind test server did not answer on port $port within 30 s; its log ($log):" >&2
cat "$log" >&2
kill "$pid" 2>/dev/null || true
exit 1
