#!/usr/bin/env bash
# Builds Helm's CLI from its published Go module (helm.sh/helm/v4, through the Go module proxy),
# once, into a cache outside the work tree, and prints the path of the program. The chart test
# lints and renders charts/hawser with it (docs/helm.md).
#
# Environment: HAWSER_HELM_CACHE (default ~/.cache/hawser-helm), HAWSER_HELM_VERSION (default
# v4.3.2).
set -euo pipefail

VERSION="${HAWSER_HELM_VERSION:-v4.3.2}"
CACHE="${HAWSER_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-helm}"
BIN="$CACHE/$VERSION"

if [[ -x "$BIN/helm" ]]; then
  echo "$BIN/helm"
  exit 0
fi

start=$SECONDS
echo "build-helm: building helm $VERSION into $BIN" >&2
rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
GOBIN="$BIN.tmp" GOFLAGS=-trimpath go install "helm.sh/helm/v4/cmd/helm@$VERSION" >&2
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "build-helm: built in $((SECONDS - start)) s" >&2
echo "$BIN/helm"
