#!/usr/bin/env bash
# Velero's own programs for tests: the `velero` binary (CLI and server in one program) and the
# `velero-plugin-for-aws` plugin, built from their published Go modules (through the Go module
# proxy) into a cache outside the work tree.
#
#   scripts/build-velero.sh         build once (cached); prints the directory holding
#                                   `velero` and `velero-plugin-for-aws`
#
# Environment: HAWSER_REAL_CACHE (default ~/.cache/hawser-real) holds the binaries under
# velero-<version>/. The versions are pinned below: Velero v1.18.3 and the AWS plugin v1.14.3 that
# goes with it.
#
# Each program gets its own wrapper module, so each is linked with the dependency versions its own
# release resolves to:
# - velero: a small main that runs Velero's root command, as Velero's cmd/velero does. Velero's
#   go.mod `replace` lines (kopia points at a fork) do not apply to a dependency, so every one of
#   them is carried into the wrapper's go.mod. Velero's version ldflags are set so that
#   `velero version` prints the release; the Git commit is not known from the module, and shows as
#   `module`.
# - velero-plugin-for-aws: its main package registers unexported constructors, so it cannot be
#   called from another main; the wrapper requires the module and builds its main package as is.
#
# The cold build (Velero's dependencies neither in the Go module cache nor in the build cache) took
# 16 min 17 s wall clock on a shared 2-core machine with other builds running at the same time
# (about 8 min of CPU); with the Go caches warm a rebuild took 36 s, and a built cache answers at
# once. The proxy used then refused k8s.io/cli-runtime v0.33.12 (see FALLBACKS), so those builds
# used v0.33.10; the binaries of both were byte for byte the same.
set -euo pipefail

VELERO_VERSION=v1.18.3
AWS_VERSION=v1.14.3
CACHE="${HAWSER_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-real}"
BIN="$CACHE/velero-$VELERO_VERSION"

# Module versions in Velero's build list that a Go module proxy may refuse ("403 Forbidden: This
# module version is not available"), each with the nearest older patch release of the same minor:
# an older one asks for no newer Kubernetes modules than Velero's own. A substitute is used only
# when the pinned version cannot be downloaded, and the build says so.
FALLBACKS=(
  "k8s.io/cli-runtime v0.33.12 v0.33.10"
)

log() { echo "build-velero: $*" >&2; }

# Prints a `replace` line for each pinned version in FALLBACKS that cannot be downloaded in
# module directory $1.
fallback_replaces() {
  local entry module pinned substitute
  for entry in "${FALLBACKS[@]}"; do
    read -r module pinned substitute <<<"$entry"
    if ! (cd "$1" && GOFLAGS=-mod=mod go mod download "$module@$pinned" >/dev/null 2>&1); then
      log "$module@$pinned cannot be downloaded; building with $substitute"
      echo "replace $module => $module $substitute"
    fi
  done
}

# Prints the path of the go.mod file of module $1 at version $2, fetching it when needed.
module_gomod() {
  (cd "$1" && GOFLAGS=-mod=mod go mod download -json "$2@$3") \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])'
}

build_velero() {
  local work="$CACHE/src/build-velero/velero-$VELERO_VERSION"
  rm -rf "$work" && mkdir -p "$work"
  local gomod
  gomod="$(module_gomod "$work" github.com/vmware-tanzu/velero "$VELERO_VERSION")"
  {
    echo "module hawser.test/velero"
    echo
    echo "go 1.26"
    echo
    echo "require github.com/vmware-tanzu/velero $VELERO_VERSION"
    echo
    # Both forms: `replace a => b v` on one line, and the lines of a `replace ( ... )` block.
    awk '
      /^replace[[:space:]]*\($/ { block = 1; next }
      block && /^\)/ { block = 0; next }
      block && /=>/ { sub(/^[[:space:]]+/, ""); print "replace " $0; next }
      /^replace[[:space:]]+[^(]/ { print }
    ' "$gomod"
  } >"$work/go.mod"
  fallback_replaces "$work" >>"$work/go.mod"
  cat >"$work/main.go" <<'EOF'
// The velero program: Velero's root command under the name the binary was started with.
package main

import (
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/vmware-tanzu/velero/pkg/cmd"
	"github.com/vmware-tanzu/velero/pkg/cmd/velero"
)

func main() {
	err := velero.NewCommand(filepath.Base(os.Args[0])).Execute()
	klog.Flush()
	cmd.CheckError(err)
}
EOF
  local pkg=github.com/vmware-tanzu/velero/pkg/buildinfo
  (cd "$work" && go mod tidy >&2 \
    && CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp/velero" \
      -ldflags "-s -w -X $pkg.Version=$VELERO_VERSION -X $pkg.GitSHA=module -X $pkg.GitTreeState=clean -X $pkg.ImageRegistry=velero" \
      . >&2)
}

build_aws_plugin() {
  local work="$CACHE/src/build-velero/velero-plugin-for-aws-$AWS_VERSION"
  rm -rf "$work" && mkdir -p "$work"
  local gomod
  gomod="$(module_gomod "$work" github.com/vmware-tanzu/velero-plugin-for-aws "$AWS_VERSION")"
  if grep -q '^replace' "$gomod"; then
    log "velero-plugin-for-aws $AWS_VERSION has replace lines in its go.mod; carry them over"
    return 1
  fi
  cat >"$work/go.mod" <<EOF
module hawser.test/velero-plugin-for-aws

go 1.26

require github.com/vmware-tanzu/velero-plugin-for-aws $AWS_VERSION
EOF
  # `go mod tidy` keeps only what the module's own packages import; the plugin's main package is
  # named by a build-tagged file so that its requirements stay.
  cat >"$work/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"
EOF
  (cd "$work" && go mod tidy >&2 \
    && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/velero-plugin-for-aws" \
      github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws >&2)
}

if [[ -x "$BIN/velero" && -x "$BIN/velero-plugin-for-aws" ]]; then
  echo "$BIN"
  exit 0
fi
start=$SECONDS
log "building velero $VELERO_VERSION and velero-plugin-for-aws $AWS_VERSION into $BIN"
rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
build_velero
build_aws_plugin
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
log "built in $((SECONDS - start)) s"
echo "$BIN"
