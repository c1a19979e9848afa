#!/usr/bin/env bash
# Builds kopia's CLI from the Go module Velero v1.18.3 builds its uploader from (Velero's kopia
# fork, github.com/project-velero/kopia at the version Velero's go.mod pins in its replace
# directive), through the Go module proxy, once, into a cache outside the work tree, and prints
# the path of the program. The interop tests of crates/hawser-kopia write repositories with it.
#
# Usage: scripts/build-kopia.sh [VELERO]   VELERO 1.15, 1.16, 1.17 or 1.18 (the default): the
# fork that release of Velero pins (v1.15.2, v1.16.2, v1.17.2, v1.18.3).
#
# Environment: HAWSER_KOPIA_CACHE (default ~/.cache/hawser-kopia), HAWSER_KOPIA_MODULE and
# HAWSER_KOPIA_VERSION (default: Velero's fork at its pinned version).
set -euo pipefail

case "${1:-1.18}" in
  1.15) pinned=v0.0.0-20241016073907-939dae5f9001 ;;
  1.16) pinned=v0.0.0-20250227051353-20bfabbfc7a0 ;;
  1.17) pinned=v0.0.0-20250722052735-3ea24d208777 ;;
  1.18) pinned=v0.0.0-20251230033609-d946b1e75197 ;;
  *) echo "build-kopia: no kopia known for Velero $1 (1.15, 1.16, 1.17 or 1.18)" >&2; exit 2 ;;
esac
MODULE="${HAWSER_KOPIA_MODULE:-github.com/project-velero/kopia}"
VERSION="${HAWSER_KOPIA_VERSION:-$pinned}"
CACHE="${HAWSER_KOPIA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-kopia}"
BIN="$CACHE/$(basename "$MODULE")-$VERSION"

if [[ -x "$BIN/kopia" ]]; then
  echo "$BIN/kopia"
  exit 0
fi

start=$SECONDS
echo "build-kopia: building $MODULE@$VERSION into $BIN" >&2
# The fork names itself github.com/kopia/kopia in its go.mod, so it is built in its own module
# directory (the module cache's copy) rather than installed by path.
dir="$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$dir" ]] || { echo "build-kopia: no module directory for $MODULE@$VERSION" >&2; exit 1; }
rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp"
(cd "$dir" && go build -trimpath -o "$BIN.tmp/kopia" . >&2)
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "build-kopia: built in $((SECONDS - start)) s" >&2
echo "$BIN/kopia"
