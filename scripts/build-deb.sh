#!/bin/sh
# Usage: scripts/build-deb.sh BINARY [OUTPUT_DIR]
# Builds devtrust_VERSION_ARCH.deb in OUTPUT_DIR (default .build/deb) from the
# release binary BINARY (`make build`'s), with dpkg-buildpackage and debhelper,
# and prints the package's path as the last line. The version is the one
# `BINARY --version` prints; debian/changelog is written from it here.
set -eu
cd "$(dirname "$0")/.."
source_dir=$(pwd)
binary=$(realpath "$1")
output=${2:-.build/deb}

version=$("$binary" --version | sed -n 's/^devtrust \([0-9][0-9A-Za-z.+~]*\)$/\1/p')
if [ -z "$version" ]; then
    echo "build-deb: $binary --version did not print \"devtrust VERSION\"" >&2
    exit 1
fi

mkdir -p "$output"
output=$(realpath "$output")
staging=$output/devtrust-$version
rm -rf "$staging"
mkdir -p "$staging"
cp -R debian "$staging/debian"

# The changelog is dated with the commit, not the clock: the same commit built
# again in the same checkout gives the same package (another checkout path
# changes the binary: the build path reaches it).
if epoch=$(git -C "$source_dir" log -1 --format=%ct 2>/dev/null) && [ -n "$epoch" ]; then
    commit=" from commit $(git -C "$source_dir" rev-parse --short=12 HEAD)"
else
    epoch=$(date +%s) commit=""
fi
maintainer=$(sed -n 's/^Maintainer: //p' debian/control)
cat > "$staging/debian/changelog" <<CHANGELOG
devtrust ($version) unstable; urgency=medium

  * devtrust $version, built$commit with \`make deb\`.

 -- $maintainer  $(date -u -R -d "@$epoch")
CHANGELOG

rm -f "$output/devtrust_${version}_"*.deb "$output/devtrust_${version}_"*.buildinfo "$output/devtrust_${version}_"*.changes
(cd "$staging" && DEVTRUST_SOURCE="$source_dir" INSTALL_BINARY="$binary" \
    dpkg-buildpackage --build=binary --no-sign >&2)

package=$output/devtrust_${version}_$(dpkg-architecture -qDEB_HOST_ARCH).deb
if [ ! -f "$package" ]; then
    echo "build-deb: dpkg-buildpackage made no $package" >&2
    exit 1
fi
echo "$package"
