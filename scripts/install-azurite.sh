#!/usr/bin/env bash
# Prints the path of Azurite's blob service (azurite-blob, Azurite 3.35.0, Microsoft's Azure
# Storage emulator), installing it from the npm registry first when it is not there (about 30 s;
# cached in ~/.cache/hawser-azurite).
set -euo pipefail
version=3.35.0
dir="${HAWSER_AZURITE_ROOT:-$HOME/.cache/hawser-azurite/$version}"
bin="$dir/node_modules/.bin/azurite-blob"
if [ ! -x "$bin" ]; then
    # Tests start servers in parallel: one installs, the others wait for it.
    mkdir -p "$dir"
    exec 9>"$dir.lock"
    flock 9
    if [ ! -x "$bin" ]; then
        echo "installing azurite $version into $dir" >&2
        npm install --silent --no-audit --no-fund --prefix "$dir" "azurite@$version" >&2
    fi
fi
echo "$bin"
