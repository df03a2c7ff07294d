#!/bin/sh
# Makes sure the Debian packages named as arguments are installed.
# As root it installs the missing ones (apt-get update once, then install -y);
# otherwise it prints the exact command to run and fails.
set -eu

missing=""
for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $package"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "devtrust: these Debian packages are needed:$missing" >&2
    echo "devtrust: run: sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "devtrust: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
