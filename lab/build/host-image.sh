#!/usr/bin/env bash
# Build the lab's bare-metal host image offline from Debian packages (no registry is reachable), once.
#   host-image.sh TAG   -> podman image localhost/gpufleet-lab-host:TAG
# The rootfs is cached as a tarball under $GPUFLEET_LAB_CACHE/images so a machine that lost its podman store
# re-imports in seconds.
set -Eeuo pipefail
tag=${1:?usage: host-image.sh TAG}
image="localhost/gpufleet-lab-host:$tag"
cache=${GPUFLEET_LAB_CACHE:-$HOME/.cache/gpufleet/lab}
tarball="$cache/images/gpufleet-lab-host-$tag.tar"
if podman image exists "$image"; then echo "lab image: $image present"; exit 0; fi
mkdir -p "$cache/images"
if [[ ! -s "$tarball" ]]; then
  rootfs=$(mktemp -d "$cache/images/rootfs-XXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "lab image: debootstrap bookworm into $rootfs (about a minute)"
  debootstrap --variant=minbase \
    --include=python3,python3-yaml,python3-apt,sudo,procps,iproute2,ca-certificates,kmod,openssh-server \
    bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
  # No services start at install time inside the image; apt keeps downloaded packages out of the way.
  printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
  chmod +x "$rootfs/usr/sbin/policy-rc.d"
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
  tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
fi
echo "lab image: importing $tarball as $image"
podman import --change 'CMD ["sleep", "infinity"]' "$tarball" "$image" >/dev/null
echo "lab image: $image ready"
