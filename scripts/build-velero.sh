#!/usr/bin/env bash
# Builds Velero's own programs from their published Go modules (through the Go module proxy) into
# a cache outside the work tree, and prints that directory:
#   velero                   the CLI and the server in one program (github.com/vmware-tanzu/velero)
#   velero-plugin-for-aws    the object-store plugin Velero runs for `provider: aws`
#
# Velero's go.mod replaces kopia with its own fork; replace lines only apply in the main module,
# so the module built here repeats every replace line of the Velero release it builds.
#
# Environment: HAWSER_REAL_CACHE (default ~/.cache/hawser-real), HAWSER_VELERO_VERSION (default
# v1.18.3), HAWSER_VELERO_AWS_VERSION (default v1.14.3).
set -euo pipefail

VELERO_VERSION="${HAWSER_VELERO_VERSION:-v1.18.3}"
AWS_VERSION="${HAWSER_VELERO_AWS_VERSION:-v1.14.3}"
CACHE="${HAWSER_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-real}"
BIN="$CACHE/velero-$VELERO_VERSION-aws-$AWS_VERSION"

if [[ -x "$BIN/velero" && -x "$BIN/velero-plugin-for-aws" ]]; then
  echo "$BIN"
  exit 0
fi

start=$SECONDS
echo "build-velero: building velero $VELERO_VERSION and velero-plugin-for-aws $AWS_VERSION into $BIN" >&2
work="$CACHE/src/velero-$VELERO_VERSION"
rm -rf "$work" "$BIN.tmp" && mkdir -p "$work" "$BIN.tmp"
gomod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/vmware-tanzu/velero@$VELERO_VERSION" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
{
  echo "module hawser.test/velero"
  echo
  echo "go 1.26"
  echo
  echo "require ("
  echo "	github.com/vmware-tanzu/velero $VELERO_VERSION"
  echo "	github.com/vmware-tanzu/velero-plugin-for-aws $AWS_VERSION"
  # Velero v1.18.3 asks for k8s.io/cli-runtime v0.33.12, which the Go module proxy refuses
  # ("403 Forbidden: This module version is not available"); the next patch release is served.
  echo "	k8s.io/cli-runtime v0.33.13"
  echo ")"
  echo
  grep -E '^replace[[:space:]]' "$gomod" || true
  sed -n '/^replace[[:space:]]*($/,/^)/p' "$gomod"
} >"$work/go.mod"
# A blank import keeps `go mod tidy` from dropping the requirements the build needs.
cat >"$work/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"
	_ "github.com/vmware-tanzu/velero/cmd/velero"
)
EOF
pkg=github.com/vmware-tanzu/velero/pkg/buildinfo
(cd "$work" && go mod tidy >&2 \
  && go build -trimpath -o "$BIN.tmp/velero" \
    -ldflags "-s -w -X $pkg.Version=$VELERO_VERSION -X $pkg.GitTreeState=clean" \
    github.com/vmware-tanzu/velero/cmd/velero >&2 \
  && go build -trimpath -o "$BIN.tmp/velero-plugin-for-aws" -ldflags "-s -w" \
    github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws >&2)
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "build-velero: built in $((SECONDS - start)) s" >&2
echo "$BIN"
