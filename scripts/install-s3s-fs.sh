#!/usr/bin/env bash
# Prints the path of the s3s-fs binary (v0.14.1, the last release that builds with Rust 1.95),
# installing it from crates.io with `cargo install` first when it is not there (about 3 minutes
# on 2 cores; cached in ~/.cache/hawser-s3s-fs).
set -euo pipefail
version=0.14.1
root="${HAWSER_S3S_FS_ROOT:-$HOME/.cache/hawser-s3s-fs/$version}"
bin="$root/bin/s3s-fs"
if [ ! -x "$bin" ]; then
    echo "installing s3s-fs $version into $root" >&2
    cargo install --quiet --locked s3s-fs --version "$version" --features binary --root "$root" >&2
fi
echo "$bin"
