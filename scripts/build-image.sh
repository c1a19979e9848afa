#!/usr/bin/env bash
# Builds hawser's container image with buildah, without a container engine, a registry or a
# base image (docs/server.md, "Running on a real cluster"):
#   scripts/build-image.sh [BINARY]
# BINARY defaults to a release build (cargo build --release -p hawser). The root filesystem is
# assembled from the binary, the shared libraries `ldd` says it loads (at the paths it loads them
# from), the system's CA bundle (for TLS to object stores and API servers) and an empty /tmp, then
# image/Containerfile copies it into a `FROM scratch` image.
#
# Environment:
#   HAWSER_IMAGE          the tag (default localhost/hawser:v<workspace version>)
#   HAWSER_IMAGE_DIR      the work directory, with buildah's storage in it (default target/image)
#   HAWSER_IMAGE_ARCHIVE  if set, a docker-archive file to write the image to (`docker load -i`,
#                         `podman load -i`)
# Prints the tag on stdout; the image's size on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

binary="${1:-}"
if [ -z "$binary" ]; then
  cargo build --release -p hawser >&2
  binary=target/release/hawser
fi
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
image="${HAWSER_IMAGE:-localhost/hawser:v$version}"
dir="${HAWSER_IMAGE_DIR:-target/image}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
buildah=(buildah --root "$dir/storage" --runroot "$dir/run" --storage-driver vfs)

rootfs="$dir/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
# Stripped: the image carries no debug information.
install -m 0755 --strip "$binary" "$rootfs/hawser"
ln -s hawser "$rootfs/velero"
# `ldd` lines: `name => /path (addr)` for libraries, `/path (addr)` for the loader.
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
  while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
cp -L /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
cp image/Containerfile "$dir/Containerfile"

"${buildah[@]}" bud --isolation chroot --quiet -f "$dir/Containerfile" -t "$image" "$dir" >&2
size="$("${buildah[@]}" images --format '{{.Size}}' "$image")"
echo "scripts/build-image.sh: $image, $size" >&2
if [ -n "${HAWSER_IMAGE_ARCHIVE:-}" ]; then
  "${buildah[@]}" push --quiet "$image" "docker-archive:$HAWSER_IMAGE_ARCHIVE:$image" >&2
  echo "scripts/build-image.sh: written to $HAWSER_IMAGE_ARCHIVE ($(du -h "$HAWSER_IMAGE_ARCHIVE" | cut -f1))" >&2
fi
echo "$image"
