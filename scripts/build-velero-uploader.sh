#!/usr/bin/env bash
# Builds `velero-uploader` (scripts/velero-uploader/main.go), a test oracle that writes and reads
# kopia repositories in S3 with Velero's own repository and uploader code, against Velero's
# published Go module (through the Go module proxy), once, into a cache outside the work tree, and
# prints the path of the program. crates/hawser-kopia is checked against it.
#
# Velero's go.mod replaces kopia with its own fork; replace lines only apply in the main module, so
# the module built here repeats every replace line of the Velero release it builds against (as
# scripts/build-velero.sh does).
#
# Environment: HAWSER_VELERO_UPLOADER_CACHE (default ~/.cache/hawser-velero-uploader),
# HAWSER_VELERO_VERSION (default v1.18.3).
set -euo pipefail
cd "$(dirname "$0")"

VERSION="${HAWSER_VELERO_VERSION:-v1.18.3}"
CACHE="${HAWSER_VELERO_UPLOADER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-velero-uploader}"
source_sum="$( (cat velero-uploader/main.go; echo "$VERSION") | sha256sum | cut -c1-12)"
BIN="$CACHE/$VERSION-$source_sum"

if [[ -x "$BIN/velero-uploader" ]]; then
  echo "$BIN/velero-uploader"
  exit 0
fi

start=$SECONDS
echo "build-velero-uploader: building against velero $VERSION into $BIN" >&2
work="$CACHE/src-$VERSION"
rm -rf "$work" "$BIN.tmp" && mkdir -p "$work" "$BIN.tmp"
cp velero-uploader/main.go "$work/main.go"
gomod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/vmware-tanzu/velero@$VERSION" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
{
  echo "module hawser.test/velero-uploader"
  echo
  echo "go 1.26"
  echo
  echo "require ("
  echo "	github.com/vmware-tanzu/velero $VERSION"
  # Velero v1.18.3 asks for k8s.io/cli-runtime v0.33.12, which the Go module proxy refuses
  # ("403 Forbidden: This module version is not available"); the next patch release is served.
  echo "	k8s.io/cli-runtime v0.33.13"
  echo ")"
  echo
  grep -E '^replace[[:space:]]' "$gomod" || true
  sed -n '/^replace[[:space:]]*($/,/^)/p' "$gomod"
} >"$work/go.mod"
(cd "$work" && GOFLAGS=-mod=mod nice -n 19 go mod tidy >&2 \
  && GOFLAGS=-mod=mod nice -n 19 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/velero-uploader" . >&2)
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "build-velero-uploader: built in $((SECONDS - start)) s" >&2
echo "$BIN/velero-uploader"
