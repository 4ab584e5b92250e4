#!/usr/bin/env bash
# Builds Kiln's container image (localhost/kiln:latest) with no registry but Debian's:
#   1. Node 20 as a .deb, rebuilt from this machine's installation (dpkg-repack nodejs);
#   2. a Debian bookworm root file system with LibTorch and OpenBLAS (mmdebstrap), imported
#      into podman as localhost/kiln-base:bookworm;
#   3. Kiln installed from its own packed tarballs (npm pack) into a folder, outside the repo;
#   4. deploy/container/Containerfile on top.
# Needs: podman runc uidmap mmdebstrap dpkg-repack (Debian), Node 20 with npm, the repo's
# node_modules. Steps 1 and 2 are kept in $KILN_IMAGE_WORK between runs when it is set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
image="${KILN_IMAGE:-localhost/kiln:latest}"
work="${KILN_IMAGE_WORK:-$(mktemp -d /tmp/kiln-image-XXXXXX)}"
mkdir -p "$work"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
podman=(podman --runtime runc)
log() { printf '[build-image] %s\n' "$*" >&2; }

for tool in podman runc mmdebstrap dpkg-repack npm; do
  command -v "$tool" >/dev/null || { log "missing $tool (apt-get install podman runc uidmap mmdebstrap dpkg-repack)"; exit 2; }
done

context="$work/context"
rm -rf "$context" && mkdir -p "$context"

# 1. Node 20 (Debian bookworm carries Node 18 only).
if ! ls "$work"/nodejs_*.deb >/dev/null 2>&1; then
  log "repacking the installed nodejs package"
  (cd "$work" && dpkg-repack nodejs >&2)
fi
cp "$(ls "$work"/nodejs_*.deb | head -n1)" "$context/nodejs.deb"

# 2. The base root file system.
if ! "${podman[@]}" image exists localhost/kiln-base:bookworm; then
  if [ ! -s "$work/rootfs.tar" ]; then
    log "mmdebstrap bookworm (minbase + LibTorch, OpenBLAS, Python for Node's package)"
    mmdebstrap --variant=minbase \
      --include=ca-certificates,python3,libtorch1.13,libopenblas0-pthread \
      --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      bookworm "$work/rootfs.tar" >&2
  fi
  "${podman[@]}" import "$work/rootfs.tar" localhost/kiln-base:bookworm >&2
fi

# 3. Kiln from its packed tarballs: the CLI and every workspace package it depends on.
log "packing Kiln"
tarballs="$work/tarballs"
rm -rf "$tarballs" && mkdir -p "$tarballs"
packages="$(cd "$repo" && node "$here/workspace-closure.mjs" @kiln/cli)"
(cd "$repo" && for p in $packages; do npm pack --silent -w "$p" --pack-destination "$tarballs" >&2; done)
mkdir -p "$context/kiln"
echo '{"name":"kiln-image","private":true}' > "$context/kiln/package.json"
log "installing the tarballs into the image folder"
(cd "$context/kiln" && ONNXRUNTIME_NODE_INSTALL=skip npm install --omit=dev --no-audit --no-fund \
  --no-package-lock "$tarballs"/*.tgz >&2)

# 4. The image.
log "podman build $image"
cp "$here/Containerfile" "$context/Containerfile"
"${podman[@]}" build --pull=never --network=host -t "$image" -f "$context/Containerfile" "$context" >&2
rm -rf "$context"
"${podman[@]}" image inspect --format '{{.Size}}' "$image"
