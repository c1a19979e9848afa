#!/usr/bin/env bash
# Builds `promql-check` (scripts/promql-check/main.go) against Prometheus's own rule-file and
# PromQL parsers, from Prometheus's published Go module (through the Go module proxy), once, into
# a cache outside the work tree, and prints the path of the program. The monitoring test checks
# the alert rules and the dashboard's queries with it (docs/monitoring.md). Only the parser
# packages are compiled, not all of promtool.
#
# Environment: HAWSER_PROMQL_CACHE (default ~/.cache/hawser-promql-check),
# HAWSER_PROMETHEUS_VERSION (default v0.316.0, the module version of Prometheus 3.x).
set -euo pipefail
cd "$(dirname "$0")"

VERSION="${HAWSER_PROMETHEUS_VERSION:-v0.316.0}"
CACHE="${HAWSER_PROMQL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hawser-promql-check}"
source_sum="$(sha256sum promql-check/main.go | cut -c1-12)"
BIN="$CACHE/$VERSION-$source_sum"

if [[ -x "$BIN/promql-check" ]]; then
  echo "$BIN/promql-check"
  exit 0
fi

start=$SECONDS
echo "build-promql-check: building against prometheus $VERSION into $BIN" >&2
work="$CACHE/src-$VERSION"
rm -rf "$work" "$BIN.tmp" && mkdir -p "$work" "$BIN.tmp"
cp promql-check/main.go "$work/main.go"
cat >"$work/go.mod" <<MOD
module hawser.test/promql-check

go 1.26

require github.com/prometheus/prometheus $VERSION
MOD
(cd "$work" && go mod tidy >&2 && go build -trimpath -o "$BIN.tmp/promql-check" . >&2)
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "build-promql-check: built in $((SECONDS - start)) s" >&2
echo "$BIN/promql-check"
