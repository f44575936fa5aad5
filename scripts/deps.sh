#!/usr/bin/env bash
# Installs the Debian packages sanbench's tests and benchmarks drive as reference peers.
# qemu-system-x86, busybox-static, linux-image-amd64, socat: the Linux kernel as an NVMe/TCP
# peer in a TCG guest (crates/testkit/src/vm.rs). Idempotent: does nothing when everything is
# present. Needs root (CI runs as root).
set -euo pipefail
pkgs=(fio tgt nbdkit libnbd-bin libiscsi-bin qemu-utils e2fsprogs util-linux mount
      iperf3 ethtool iproute2 chromium sqlite3 zstd nbdkit-plugin-python
      qemu-system-x86 busybox-static linux-image-amd64 socat kmod xz-utils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "sanbench tests need these Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# cargo-fuzz runs the fuzz targets (scripts/fuzz.sh) on the stable toolchain.
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing: cargo-fuzz"
  cargo install --locked cargo-fuzz >/dev/null
fi
