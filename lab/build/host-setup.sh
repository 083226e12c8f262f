#!/usr/bin/env bash
# Machine set-up the lab needs (run as root; idempotent): podman with runc, debootstrap, dpkg-dev, iproute2 and
# util-linux's nsenter (the lab's bridge and a network namespace per host, lab/gpufleet_lab/network.py), the ssh
# client (Ansible reaches the lab hosts over SSH, as it reaches real ones); and Debian's headless Chromium, in which
# the tests render the fleet report's HTML page (tests/integration/test_fleet_report_browser.py).
# The default runtime crun fails on this kind of machine ("cgroups in hybrid mode not supported") and raising
# rlimits is not permitted, so podman is pinned to runc with ulimits at or below the hard limits (LAB-NOTES.md).
set -Eeuo pipefail
missing=()
for tool in podman:podman runc:runc debootstrap:debootstrap dpkg-scanpackages:dpkg-dev ip:iproute2 nsenter:util-linux \
            ssh:openssh-client \
            ssh-keygen:openssh-client chromium-headless-shell:chromium-headless-shell; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool##*:}")
done
if ((${#missing[@]})); then
  echo "lab setup: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
conf=/etc/containers/containers.conf
if ! grep -qs 'runtime = "runc"' "$conf"; then
  echo "lab setup: writing $conf (runc, ulimits within the hard limits)"
  mkdir -p /etc/containers
  cat > "$conf" <<'CONF'
# Written by gpufleet lab/build/host-setup.sh: crun fails on cgroup v1/v2 hybrid hosts, and raising rlimits is
# not permitted in this sandbox.
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
fi
