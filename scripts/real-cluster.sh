#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for tests: etcd, kube-apiserver and
# kube-controller-manager, built from their published Go modules (through the Go module proxy)
# into a cache outside the work tree, then started with generated keys and an admin token.
#
#   scripts/real-cluster.sh build         build once (cached); prints the binary directory
#   scripts/real-cluster.sh up DIR        start etcd + API server + controller manager in DIR;
#                                         prints `api: URL`, writes DIR/kubeconfig
#   scripts/real-cluster.sh apiserver DIR ETCD PREFIX
#                                         start only an API server (+ controller manager) on an
#                                         etcd already running, under its own key prefix: a second,
#                                         independent cluster in a few seconds
#   scripts/real-cluster.sh stop-apiserver DIR
#                                         stop (SIGTERM, as a rollout does) the API server of a
#                                         running cluster; etcd and the rest keep running
#   scripts/real-cluster.sh start-apiserver DIR
#                                         start that API server again, on the same address with
#                                         the same certificates and token; returns once it is ready
#   scripts/real-cluster.sh down DIR      stop what `up`/`apiserver` started in DIR
#
# Environment: HAWSER_REAL_CACHE (default ~/.cache/hawser-real) holds the binaries;
# HAWSER_KUBE_VERSION (default v1.37.2) and HAWSER_ETCD_VERSION (default v3.6.16) pick versions.
set -euo pipefail

KUBE_VERSION="${HAWSER_KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${HAWSER_ETCD_VERSION:-v3.6.16}"
CACHE="${HAWSER_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-real}"
BIN="$CACHE/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"

log() { echo "real-cluster: $*" >&2; }

# Writes a module at $1 whose main packages run the programs of module $2@$3 (with the replace
# lines $4), and builds them into $BIN.
build_kube() {
  local work="$CACHE/src/kube-$KUBE_VERSION"
  local staging="v0.${KUBE_VERSION#v1.}"
  rm -rf "$work" && mkdir -p "$work/kube-apiserver" "$work/kube-controller-manager"
  # The kubernetes module points its staging modules (k8s.io/api, k8s.io/apiserver, ...) at
  # ./staging; as a dependency each must be replaced by the published v0.x.y of the same release.
  local gomod
  gomod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  {
    echo "module hawser.test/kube"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#replace \1 => \1 '"$staging"'#p' "$gomod"
  } >"$work/go.mod"
  cat >"$work/kube-apiserver/main.go" <<'EOF'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
EOF
  cat >"$work/kube-controller-manager/main.go" <<'EOF'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
EOF
  (cd "$work" && go mod tidy >&2 \
    && go build -trimpath -o "$BIN.tmp/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" \
      ./kube-apiserver ./kube-controller-manager >&2)
}

build_etcd() {
  local work="$CACHE/src/etcd-$ETCD_VERSION"
  rm -rf "$work" && mkdir -p "$work"
  cat >"$work/go.mod" <<EOF
module hawser.test/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  cat >"$work/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "$work" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/etcd" . >&2)
}

cmd_build() {
  if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/etcd" ]]; then
    echo "$BIN"
    return
  fi
  local start=$SECONDS
  log "building kube-apiserver and kube-controller-manager $KUBE_VERSION, etcd $ETCD_VERSION into $BIN"
  rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
  build_etcd
  build_kube
  rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
  log "built in $((SECONDS - start)) s"
  echo "$BIN"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until URL answers 200 (curl with the admin token), up to $2 seconds.
wait_ok() {
  local url=$1 limit=$2 token=${3:-}
  local deadline=$((SECONDS + limit))
  until curl -ksf ${token:+-H "Authorization: Bearer $token"} "$url" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then return 1; fi
    sleep 0.2
  done
}

start_etcd() {
  local dir=$1
  local client peer
  client=$(free_port)
  peer=$(free_port)
  mkdir -p "$dir/etcd"
  "$BIN/etcd" --name hawser-test --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "hawser-test=http://127.0.0.1:$peer" \
    --unsafe-no-fsync --quota-backend-bytes 4294967296 >"$dir/etcd.log" 2>&1 &
  echo $! >>"$dir/pids"
  echo "http://127.0.0.1:$client" >"$dir/etcd-url"
  if ! wait_ok "http://127.0.0.1:$client/health" 30; then
    log "etcd did not become healthy; see $dir/etcd.log"
    tail -n 20 "$dir/etcd.log" >&2
    return 1
  fi
}

# Runs the API server of DIR from its kept command line, in the background.
run_apiserver() {
  local dir=$1
  bash "$dir/kube-apiserver.sh" >>"$dir/kube-apiserver.log" 2>&1 &
  echo $! >>"$dir/pids"
  echo $! >"$dir/kube-apiserver.pid"
}

start_apiserver() {
  local dir=$1 etcd=$2 prefix=$3
  local port token
  port=$(free_port)
  token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  mkdir -p "$dir/certs"
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  echo "$token,admin,admin,system:masters" >"$dir/tokens.csv"
  # The command line is kept, so that `start-apiserver` starts the same server again.
  printf 'exec %q' "$BIN/kube-apiserver" >"$dir/kube-apiserver.sh"
  printf ' %q' --etcd-servers "$etcd" --etcd-prefix "$prefix" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
    --cert-dir "$dir/certs" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
    >>"$dir/kube-apiserver.sh"
  : >"$dir/kube-apiserver.log"
  run_apiserver "$dir"
  local url="https://127.0.0.1:$port"
  echo "$token" >"$dir/token"
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: $url
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $token
contexts:
- name: real
  context:
    cluster: real
    user: admin
    namespace: default
current-context: real
EOF
  if ! wait_ok "$url/readyz" 90 "$token"; then
    log "kube-apiserver did not become ready; see $dir/kube-apiserver.log"
    tail -n 20 "$dir/kube-apiserver.log" >&2
    return 1
  fi
  # Namespace deletion and garbage collection, the two controllers a backup tool's tests meet
  # (HAWSER_KCM_CONTROLLERS picks others: no ServiceAccount appears in a new namespace by default).
  "$BIN/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 \
    --controllers "${HAWSER_KCM_CONTROLLERS:-namespace,garbagecollector}" \
    --service-account-private-key-file "$dir/sa.key" --use-service-account-credentials=false \
    --leader-elect=false >"$dir/kube-controller-manager.log" 2>&1 &
  echo $! >>"$dir/pids"
  echo "$url" >"$dir/api-url"
  echo "api: $url"
}

cmd_up() {
  local dir=${1:?usage: real-cluster.sh up DIR}
  cmd_build >/dev/null
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  start_etcd "$dir" || { cmd_down "$dir"; return 1; }
  start_apiserver "$dir" "$(cat "$dir/etcd-url")" /registry || { cmd_down "$dir"; return 1; }
}

cmd_apiserver() {
  local dir=${1:?usage: real-cluster.sh apiserver DIR ETCD-URL PREFIX} etcd=${2:?} prefix=${3:?}
  cmd_build >/dev/null
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  start_apiserver "$dir" "$etcd" "$prefix" || { cmd_down "$dir"; return 1; }
}

cmd_stop_apiserver() {
  local dir=${1:?usage: real-cluster.sh stop-apiserver DIR}
  local pid
  pid=$(cat "$dir/kube-apiserver.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

cmd_start_apiserver() {
  local dir=${1:?usage: real-cluster.sh start-apiserver DIR}
  cmd_build >/dev/null
  run_apiserver "$dir"
  if ! wait_ok "$(cat "$dir/api-url")/readyz" 90 "$(cat "$dir/token")"; then
    log "kube-apiserver did not become ready again; see $dir/kube-apiserver.log"
    tail -n 20 "$dir/kube-apiserver.log" >&2
    return 1
  fi
}

cmd_down() {
  local dir=${1:?usage: real-cluster.sh down DIR}
  [[ -f "$dir/pids" ]] || return 0
  local pids
  pids=$(tac "$dir/pids")
  kill $pids 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 $pids 2>/dev/null || break
    sleep 0.1
  done
  kill -9 $pids 2>/dev/null || true
  rm -f "$dir/pids"
}

case "${1:-}" in
  build) cmd_build ;;
  up) shift; cmd_up "$@" ;;
  apiserver) shift; cmd_apiserver "$@" ;;
  stop-apiserver) shift; cmd_stop_apiserver "$@" ;;
  start-apiserver) shift; cmd_start_apiserver "$@" ;;
  down) shift; cmd_down "$@" ;;
  *) sed -n '2,24p' "$0" >&2; exit 2 ;;
esac
