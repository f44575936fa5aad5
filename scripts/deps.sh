#!/usr/bin/env bash
# Installs the Debian packages sanbench's tests and benchmarks drive as reference peers.
# qemu-system-x86, busybox-static, linux-image-amd64, socat: the Linux kernel as an NVMe/TCP
# peer in a TCG guest (crates/testkit/src/vm.rs); nbd-client, open-iscsi: the kernel's NBD and
# iSCSI initiators, copied into that guest with their libraries; iproute2's ip and rdma,
# iscsid/iscsiadm and the kernel's fcoe, LIO, rdma_rxe and nvmet modules make the guest's
# software SAN (crates/cli/tests/kernel_san.rs: no fcoe-utils, targetcli or rdma-core needed,
# all configfs and sysfs); dmsetup: dm-multipath over the guest's two iSCSI paths
# (crates/cli/tests/kernel_multipath.rs); binutils strips sanbench before it goes into the guest;
# blktrace: blktrace and blkparse record a trace in that guest (crates/cli/tests/kernel_targets/).
# openmpi-bin, libopenmpi-dev, libclang-dev: the `mpi` feature (rsmpi's bindgen needs
# libclang) and its tests under mpirun. libssl-dev, pkg-config: the tls-psk feature (NBD TLS
# with pre-shared keys through OpenSSL); openssl: the command-line tool the TLS tests make
# their certificates with. prometheus: a real server scraping `--metrics-listen`
# (crates/cli/tests/metrics_endpoint.rs). man-db: `man -l` renders the pages `sanbench man` writes
# (crates/cli/tests/help_cli.rs, interop). The test suite builds both features. Idempotent: does nothing when
# everything is present. Needs root (CI runs as root).
set -euo pipefail
# The cargo tools build from crates.io (~2.5 min of compiling on 2 cores): they start before the
# Debian packages and build while apt downloads and unpacks (CI's fresh machine saves ~2 min);
# a build that fails beside apt (a tool it links with replaced under it) is run again after.
cargo_tools() {
  # cargo-fuzz runs the fuzz targets (scripts/fuzz.sh) on the stable toolchain.
  if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing: cargo-fuzz"
    cargo install --locked cargo-fuzz >/dev/null
  fi
  # mdbook builds the user guide (scripts/guide.sh, docs/guide): Debian has no package, so from
  # crates.io, without the watch and serve features (a build that only renders; ~3 min once).
  if ! mdbook --version >/dev/null 2>&1; then
    echo "installing: mdbook"
    cargo install --locked mdbook --no-default-features --features search >/dev/null
  fi
}
tools_log=$(mktemp)
cargo_tools >"$tools_log" 2>&1 &
tools_pid=$!
trap 'kill "$tools_pid" 2>/dev/null || true; rm -f "$tools_log"' EXIT
pkgs=(fio tgt nbdkit libnbd-bin libiscsi-bin qemu-utils e2fsprogs util-linux mount
      iperf3 ethtool iproute2 binutils chromium sqlite3 zstd nbdkit-plugin-python
      qemu-system-x86 busybox-static linux-image-amd64 socat kmod xz-utils
      nbd-client open-iscsi dmsetup openmpi-bin libopenmpi-dev libclang-dev
      libssl-dev pkg-config openssl prometheus man-db blktrace)
missing_now() {
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
}
# Twice: installing one package may remove another it conflicts with (on a machine with
# qemu-utils from backports, qemu-system-x86 from stable replaces it), and the second pass puts
# back a version that fits beside the first.
for pass in 1 2; do
  missing_now
  [ ${#missing[@]} -eq 0 ] && break
  if [ "$(id -u)" != 0 ]; then
    echo "sanbench tests need these Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  [ "$pass" = 1 ] && apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
done
missing_now
if [ ${#missing[@]} -gt 0 ]; then
  echo "could not install together: ${missing[*]}" >&2
  exit 1
fi
tools_rc=0
wait "$tools_pid" || tools_rc=$?
trap - EXIT
if [ "$tools_rc" != 0 ]; then
  echo "the cargo tools' build beside apt failed; again, alone:" >&2
  tail -5 "$tools_log" >&2
  cargo_tools
fi
cat "$tools_log"
rm -f "$tools_log"
# The hdrhistogram Python package reads --hist-log's interval log back in
# crates/cli/tests/hist_log.rs (HdrHistogram's own reader, not sanbench's).
if ! python3 -c "import hdrh" >/dev/null 2>&1; then
  echo "installing: hdrhistogram (pip)"
  pip install --quiet hdrhistogram
fi
