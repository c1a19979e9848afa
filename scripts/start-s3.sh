#!/usr/bin/env bash
# Starts an S3-protocol test server: scripts/start-storage.sh with the server named by
# HAWSER_S3_SERVER (`moto`, the default, or `s3s-fs`) and the variables HAWSER_S3_PIDFILE,
# HAWSER_S3_LOG and HAWSER_S3_ROOT for its HAWSER_STORAGE_* ones.
# Usage: scripts/start-s3.sh [PORT]; prints http://127.0.0.1:PORT.
set -euo pipefail
export HAWSER_STORAGE_PIDFILE="${HAWSER_S3_PIDFILE:-${HAWSER_STORAGE_PIDFILE:-}}"
export HAWSER_STORAGE_LOG="${HAWSER_S3_LOG:-${HAWSER_STORAGE_LOG:-}}"
export HAWSER_STORAGE_ROOT="${HAWSER_S3_ROOT:-${HAWSER_STORAGE_ROOT:-}}"
[ -n "$HAWSER_STORAGE_LOG" ] || unset HAWSER_STORAGE_LOG
[ -n "$HAWSER_STORAGE_ROOT" ] || unset HAWSER_STORAGE_ROOT
exec "$(dirname "$0")/start-storage.sh" "${HAWSER_S3_SERVER:-moto}" "$@"
