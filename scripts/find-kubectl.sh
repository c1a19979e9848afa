#!/usr/bin/env bash
# Prints the path of a real kubectl binary, installing Debian's kubernetes-client when none is found.
# Some machines carry kubectl as a version dispatcher whose versioned binaries sit beside it; the
# dispatcher itself may try to reach the network, so a versioned binary is preferred.
set -euo pipefail

for candidate in /usr/lib/google-cloud-sdk/bin/kubectl.1.33 /usr/lib/google-cloud-sdk/bin/kubectl.1.32; do
  if [ -x "$candidate" ]; then echo "$candidate"; exit 0; fi
done
if command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null 2>&1; then
  command -v kubectl; exit 0
fi

# Debian's package; unpacked beside the checkout so it cannot clash with an installed kubectl.
dest="${KUBECTL_DIR:-$HOME/.cache/hawser-kubectl}"
if [ ! -x "$dest/usr/bin/kubectl" ]; then
  mkdir -p "$dest"
  work=$(mktemp -d)
  (cd "$work" && apt-get update -qq >/dev/null && apt-get download -qq kubernetes-client >/dev/null)
  dpkg-deb -x "$work"/kubernetes-client_*.deb "$dest"
  rm -rf "$work"
fi
echo "$dest/usr/bin/kubectl"
