//! Trim, write-zeroes, passthrough and blktrace against the kernel's own targets: the second
//! part of passthrough_guest's guest (testkit::vm; issue 42, "Tests (real peers)"; one boot for
//! both, its console split at [`MARKER`]). Inside the guest, on an ext4 file
//! system over a RAM disk, sparse files back nvmet (NVMe/TCP on 127.0.0.1) and LIO (fileio
//! backstores: an iSCSI portal on 127.0.0.1, and tcm_loop).
//!
//! - sanbench's NVMe/TCP and iSCSI initiators: a read/write/trim/write-zeroes mix over a
//!   filled span passes `--verify`; a trim-only pass over what it left makes the backing
//!   file's allocated blocks (stat, read in the guest) drop by what was trimmed; a LIO LUN
//!   without emulate_tpu, emulate_tpws and WRITE SAME is refused a trim and a write-zeroes
//!   (exit 2) before any I/O (its file stays unallocated).
//! - The kernel's nvme-tcp host on the guest's own nvmet and a tcm_loop LUN: the verified mix
//!   on `nvme-ng:` beside `/dev/nvmeXnY` and on `sg:` beside `/dev/sdX`, and a `compare` of
//!   each block device with its passthrough twin.
//! - blktrace records dd and blkdiscard on the NVMe/TCP disk; blkparse's text and the binary
//!   trace come out on the console, and the host replays both (`sanbench replay` on mem:): the
//!   ops, bytes and order (the replay's issued digest) are those of the queue events blkparse
//!   printed, parsed here independently of crates/trace.
//!
//! The guest's figures are emulated-CPU (TCG) figures: for correctness, not performance.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The line the part starts with: what the guest printed from it on is this part's.
pub const MARKER: &str = "SANBENCH-KERNEL-TARGETS";

/// The modules the part needs (loaded at boot with the first part's).
pub const MODULES: &[&str] = &[
    "configfs",
    "crc32c_generic",
    "brd",
    "ext4",
    "sd_mod",
    "sg",
    "target_core_file",
    "iscsi_target_mod",
    "tcm_loop",
    "nvmet-tcp",
    "nvme-tcp",
];

/// brd's one RAM disk holds the ext4 file system of the backing files.
pub const PARAMS: (&str, &str) = ("brd", "rd_nr=1 rd_size=98304");

/// The host's programs the part runs in the guest (absolute paths): blktrace, blkparse, mke2fs.
pub fn programs() -> Vec<String> {
    sanbench_testkit::require("blktrace", "blktrace");
    sanbench_testkit::require("mke2fs", "e2fsprogs");
    // The sbin directories too: a user's PATH often lacks them (require looks there as well).
    let which = |b: &str| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from))
            .map(|d| d.join(b))
            .find(|p| p.is_file())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| panic!("{b}: not found"))
    };
    ["blktrace", "blkparse", "mke2fs"].map(which).to_vec()
}

/// The files the part reads in the guest: (path, contents).
pub fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("etc/kt.toml", SUITE.as_bytes().to_vec()),
        (
            "etc/mke2fs.conf",
            std::fs::read("/etc/mke2fs.conf").unwrap_or_default(),
        ),
    ]
}

pub const SCRIPT: &str = r#"
echo SANBENCH-KERNEL-TARGETS
SB=/tmp/sanbench
export PATH=/bin:/usr/sbin:/usr/bin
mount -t configfs none /sys/kernel/config
mount -t debugfs none /sys/kernel/debug
T=/sys/kernel/config/target; C=/sys/kernel/config/nvmet
now() { cut -d' ' -f1 /proc/uptime; }
out() { echo "RC $1 $2 at $(now) s"; sed "s/^/OUT $1 /" /tmp/$1.out; [ -f /tmp/$1.json ] && echo "JSON $1 $(tr -d '\n' < /tmp/$1.json)"; }
# A run: NAME URI FLAGS... (NM: no host monitoring, where the manifest is not looked at)
NM=--no-monitor
sb() { local n=$1; shift; rm -f /tmp/$n.json
  $SB run "$@" --ramp 0 --quiet --json /tmp/$n.json > /tmp/$n.out 2>&1; out $n $?; }
# Allocated 512-byte blocks of a backing file: ALLOC FILE WHEN N
alloc() { sync; echo "ALLOC $1 $2 $(stat -c %b /mnt/$1.img)"; }
/usr/sbin/mke2fs -q -F -t ext4 /dev/ram0 || echo "FAIL mkfs"
mkdir -p /mnt && mount -t ext4 /dev/ram0 /mnt || echo "FAIL mount"
for f in nvmet:16 host:16 lio:16 thick:8 loop:16; do truncate -s ${f#*:}M /mnt/${f%:*}.img; done

# nvmet: one port on 127.0.0.1, a subsystem for sanbench's initiator and one for the kernel's.
P=$C/ports/1; mkdir $P; echo ipv4 > $P/addr_adrfam; echo tcp > $P/addr_trtype
echo 127.0.0.1 > $P/addr_traddr; echo 4420 > $P/addr_trsvcid
nvmet() { S=$C/subsystems/$1; mkdir $S; echo 1 > $S/attr_allow_any_host
  mkdir $S/namespaces/1; echo -n $2 > $S/namespaces/1/device_path
  echo 1 > $S/namespaces/1/enable || echo "FAIL ns $1"
  ln -s $S $P/subsystems/$1 || echo "FAIL port $1"; }
nvmet nqn.2026-11.io.sanbench:init /mnt/nvmet.img
nvmet nqn.2026-11.io.sanbench:host /mnt/host.img

# LIO fileio backstores: lio (thin: UNMAP and WRITE SAME; a punched hole reads zeros, so
# LBPRZ), thick (neither, and no WRITE SAME: its Block Limits page says a length of 0), loop
# (thin, LBPRZ left as LIO sets it) for tcm_loop.
fileio() { B=$T/core/fileio_0/$1; mkdir -p $B && echo fd_dev_name=/mnt/$1.img,fd_dev_size=$2 > $B/control \
  && echo 1 > $B/enable || echo "FAIL fileio $1"; }
fileio lio 16777216; fileio thick 8388608; fileio loop 16777216
for b in lio loop; do for a in emulate_tpu emulate_tpws; do
  echo 1 > $T/core/fileio_0/$b/attrib/$a || echo "FAIL $b $a"; done; done
echo 1 > $T/core/fileio_0/lio/attrib/unmap_zeroes_data || echo "FAIL lio unmap_zeroes_data"
echo 0 > $T/core/fileio_0/thick/attrib/max_write_same_len || echo "FAIL thick max_write_same_len"
G=$T/iscsi/iqn.2026-11.io.sanbench:lio/tpgt_1
mkdir -p $G/lun/lun_0 $G/lun/lun_1 && ln -s $T/core/fileio_0/lio $G/lun/lun_0/lio \
  && ln -s $T/core/fileio_0/thick $G/lun/lun_1/thick || echo "FAIL iscsi luns"
for a in authentication=0 generate_node_acls=1 demo_mode_write_protect=0 cache_dynamic_acls=1; do
  echo ${a#*=} > $G/attrib/${a%=*}; done
mkdir $G/np/127.0.0.1:3260 || echo "FAIL np"; echo 1 > $G/enable || echo "FAIL tpg"
L=$T/loopback/naa.5001405000000001/tpgt_1
# The nexus before the LUN: a LUN linked first is scanned without one and never shows up.
mkdir -p $L/lun/lun_0 && echo naa.5001405000000002 > $L/nexus \
  && ln -s $T/core/fileio_0/loop $L/lun/lun_0/loop || echo "FAIL tcm_loop"
# The guest's first part left its own NVMe controller (QEMU's) and SCSI disk (scsi_debug):
# the kernel's NVMe/TCP disk is the NVMe disk that was not there before the connect, the
# tcm_loop disk the one LIO names as its vendor.
BEFORE=" $(ls /sys/block | tr '\n' ' ') "
echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=nqn.2026-11.io.sanbench:host" > /dev/nvme-fabrics \
  || echo "FAIL nvme connect"
lio_sg() { for s in /sys/class/scsi_generic/*; do [ -d $s/device/block ] && grep -q LIO $s/device/vendor \
  && SG=/dev/${s##*/} && SD=/dev/$(ls $s/device/block) && return 0; done; return 1; }
SG=""; NB=""
for i in $(seq 1 100); do
  for d in $(ls /sys/block); do case "$BEFORE" in *" $d "*) ;; *) case $d in nvme*c*) ;; nvme*n*) NB=/dev/$d;; esac;; esac; done
  [ -n "$NB" ] && [ -e /dev/ng${NB#/dev/nvme} ] && lio_sg && break; sleep 0.2; done
NG=/dev/ng${NB#/dev/nvme}
echo "DEVS $NB $NG $SD $SG at $(now) s"
[ -n "$NB" ] && [ -e $NG ] || echo "FAIL no NVMe/TCP disk ($NB $NG)"; [ -n "$SG" ] || echo "FAIL no sg disk"

# 1. sanbench's initiators against nvmet and LIO: the verified mix (its fill writes the
# span), then a trim-only pass over what it left, the backing file's allocation read around.
thin() { local n=$1 u=$2; alloc $n empty
  sb $n-mix $u $NM --read 40 --trim 10 --write-zeroes 10 --bs 4k --qd 8 --time 500ms --size 8M --precondition fill --verify
  alloc $n mixed
  sb $n-trim $u $NM --read 0 --trim 100 --random 0 --bs 64k --qd 4 --time 300ms --size 8M --precondition none
  alloc $n trimmed; }
thin nvmet nvme+tcp://127.0.0.1:4420/nqn.2026-11.io.sanbench:init
thin lio iscsi://127.0.0.1:3260/iqn.2026-11.io.sanbench:lio/0
sb thick-trim iscsi://127.0.0.1:3260/iqn.2026-11.io.sanbench:lio/1 $NM --read 50 --trim 10 --bs 64k --qd 4 --time 300ms \
  --size 4M --precondition fill
sb thick-wz iscsi://127.0.0.1:3260/iqn.2026-11.io.sanbench:lio/1 $NM --read 50 --write-zeroes 10 --bs 64k --qd 4 \
  --time 300ms --size 4M --precondition fill
alloc thick after

# 3. blktrace on the kernel's NVMe/TCP disk: dd writes and reads (O_DIRECT) and a discard.
mkdir -p /tmp/bt; blktrace -d $NB -D /tmp/bt -o nvme > /tmp/bt.out 2>&1 & BT=$!
for i in $(seq 1 50); do [ -s /tmp/bt/nvme.blktrace.0 ] || [ -e /sys/kernel/debug/block/${NB##*/}/trace0 ] && break; sleep 0.1; done
sleep 0.3
dd if=/dev/urandom of=/tmp/rnd bs=64k count=4 2> /dev/null
dd if=/tmp/rnd of=$NB bs=64k count=4 seek=3 oflag=direct 2> /dev/null || echo "FAIL dd write"
dd if=$NB of=/dev/null bs=4k count=24 skip=100 iflag=direct 2> /dev/null || echo "FAIL dd read"
dd if=/tmp/rnd of=$NB bs=16k count=8 seek=40 oflag=direct 2> /dev/null || echo "FAIL dd write 2"
blkdiscard -o 2097152 -l 1048576 $NB || echo "FAIL blkdiscard"
kill -INT $BT; wait $BT   # it stops the trace, then drains what the kernel buffered
blkparse -D /tmp/bt -i nvme -o /tmp/bt.txt > /dev/null 2>&1 || echo "FAIL blkparse"
sed 's/^/BT-TXT /' /tmp/bt.txt
base64 /tmp/bt/nvme.blktrace.0 | sed 's/^/BT-BIN /'
echo "BT-END $(wc -c < /tmp/bt/nvme.blktrace.0)"

# 2. The kernel's own transports: each passthrough device beside its block device (their
# transport labels are passthrough_guest's to check).
mix() { sb $1 $2 $NM --read 40 --trim 10 --write-zeroes 10 --bs 4k --qd 8 --time 300ms --size 4M --precondition fill --verify; }
mix ng nvme-ng:$NG; mix nb $NB; mix sg sg:$SG; mix sd $SD
cmp() { rm -rf /tmp/$1; $SB compare --suite /etc/kt.toml --repeat 2 --baseline 0 $NM --no-store --quiet --out /tmp/$1 \
  block=$2 passthrough=$3 > /tmp/$1.out 2>&1; out $1 $?
  grep -o '"engine": *"[^"]*"' /tmp/$1/results.json | sort -u | sed "s/^/CMP-ENGINE $1 /"
  grep '^| ' /tmp/$1/report.md | sed "s/^/CMP-ROW $1 /"; }
cmp cmp-nvme $NB nvme-ng:$NG
cmp cmp-scsi $SD sg:$SG
echo "END at $(now) s"
"#;

/// The comparison's suite (/etc/kt.toml): random 4 KiB reads at QD 4, shortened to fit a TCG
/// guest.
pub const SUITE: &str = r#"name = "guest-passthrough"
description = "a block device of the kernel's NVMe/TCP host and of tcm_loop beside its passthrough device in a QEMU TCG guest: emulated-CPU figures, not performance figures"
ramp = "0s"
time = "300ms"

[[sweep]]
id = "rand-read"
title = "Random read 4 KiB"
group = "latency"
bs = ["4k"]
qd = [4]
segment = [{ read = 100, random = 100 }]
"#;

/// What the guest printed, by kind.
struct Console {
    text: String,
    rc: BTreeMap<String, String>,
    runs: BTreeMap<String, Value>,
    /// (file, when) -> allocated bytes (`None`: stat printed no number)
    alloc: BTreeMap<(String, String), Option<u64>>,
}

impl Console {
    fn parse(text: String) -> Console {
        let (mut rc, mut runs, mut alloc) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for l in text.lines() {
            if let Some(r) = l.strip_prefix("RC ") {
                let w: Vec<&str> = r.split_whitespace().collect();
                if w.len() >= 2 {
                    rc.insert(w[0].to_string(), w[1].to_string());
                }
            } else if let Some((name, json)) =
                l.strip_prefix("JSON ").and_then(|r| r.split_once(' '))
            {
                let v: Value = serde_json::from_str(json.trim())
                    .unwrap_or_else(|e| panic!("{name}: {e}: {json}"));
                runs.insert(name.to_string(), v);
            } else if let Some(r) = l.strip_prefix("ALLOC ") {
                let w: Vec<&str> = r.split_whitespace().collect();
                let n = w.get(2).and_then(|n| n.parse::<u64>().ok());
                alloc.insert((w[0].to_string(), w[1].to_string()), n.map(|n| n * 512));
            }
        }
        Console {
            text,
            rc,
            runs,
            alloc,
        }
    }

    fn ok(&self, name: &str) -> &Value {
        let out: Vec<&str> = self
            .text
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("OUT {name} ")))
            .collect();
        assert_eq!(
            self.rc.get(name).map(String::as_str),
            Some("0"),
            "{name}: {out:?}"
        );
        &self
            .runs
            .get(name)
            .unwrap_or_else(|| panic!("no result of {name}"))["results"][0]
    }

    fn alloc(&self, file: &str, when: &str) -> u64 {
        self.alloc
            .get(&(file.to_string(), when.to_string()))
            .unwrap_or_else(|| panic!("no allocation of {file} {when}"))
            .unwrap_or_else(|| panic!("{file} {when}: stat printed no block count"))
    }

    fn prefixed(&self, p: &str) -> Vec<&str> {
        self.text
            .lines()
            .filter_map(|l| l.strip_prefix(p))
            .collect()
    }
}

fn ios(r: &Value, op: &str) -> u64 {
    r[op]["ios"].as_u64().unwrap_or(0)
}

/// Every op of the mix was carried out and every read checked clean.
fn check_mix(name: &str, r: &Value) {
    for op in ["read", "write", "trim", "write_zeroes"] {
        assert!(ios(r, op) > 0, "{name}: no {op}: {r}");
    }
    let v = &r["verify"];
    assert!(v["reads"].as_u64().unwrap_or(0) > 0, "{name}: {v}");
    let bad = v["bad"]
        .as_object()
        .unwrap_or_else(|| panic!("{name}: {v}"));
    assert!(bad.values().all(|n| n.as_u64() == Some(0)), "{name}: {v}");
    assert_eq!(v["bad_blocks"], serde_json::json!([]), "{name}: {v}");
}

/// FNV-1a (64) over (op as a byte, offset and length as little-endian u64), as the replay
/// block's `issued_digest` is defined (docs/guide).
fn digest(ios: &[(u8, u64, u64)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &(op, off, len) in ios {
        let bytes = std::iter::once(op)
            .chain(off.to_le_bytes())
            .chain(len.to_le_bytes());
        for b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The queue events of blkparse's text with data, in order: (0 read, 1 write, 2 trim, offset,
/// length), parsed here independently of crates/trace.
fn queued(lines: &[&str]) -> Vec<(u8, u64, u64)> {
    lines
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 || f[5] != "Q" || f[8] != "+" || !f[0].contains(',') {
                return None;
            }
            let (sector, n): (u64, u64) = (f[7].parse().ok()?, f[9].parse().ok()?);
            let op = if f[6].contains('D') {
                2
            } else if f[6].contains('W') {
                1
            } else if f[6].contains('R') {
                0
            } else {
                return None;
            };
            (n > 0).then_some((op, sector * 512, n * 512))
        })
        .collect()
}

/// The runs' per-op figures as a Markdown table (docs/BENCHMARKS.md takes them from here):
/// emulated-CPU (TCG) figures, for correctness, not performance.
fn figures(c: &Console) {
    eprintln!("| run | target | op | I/Os | IOPS (TCG) | p50 us | p99 us |\n|---|---|---|---|---|---|---|");
    for name in [
        "nvmet-trim",
        "nvmet-mix",
        "lio-trim",
        "lio-mix",
        "ng",
        "nb",
        "sg",
        "sd",
    ] {
        let r = c.ok(name);
        for op in ["read", "write", "trim", "write_zeroes"] {
            let o = &r[op];
            if o["ios"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.0}"));
            eprintln!(
                "| {name} | {} | {op} | {} | {} | {} | {} |",
                r["target"].as_str().unwrap_or(""),
                o["ios"],
                f(&o["iops"]),
                f(&o["latency_us"]["p50"]),
                f(&o["latency_us"]["p99"])
            );
        }
    }
}

/// Checks what the guest printed from [`MARKER`] on; `dir`: a scratch directory (the trace
/// goes there to be replayed on the host).
pub fn check(text: String, dir: &Path) {
    let c = Console::parse(text);
    let fails = c.prefixed("FAIL");
    assert!(fails.is_empty(), "{fails:?}\n{}", c.text);

    // 1. The verified mix over a filled span, then a trim-only pass: the backing file gives
    // back what was trimmed.
    for name in ["nvmet", "lio"] {
        let (empty, mixed, trimmed) = (
            c.alloc(name, "empty"),
            c.alloc(name, "mixed"),
            c.alloc(name, "trimmed"),
        );
        let span = 8u64 << 20;
        let m = c.ok(&format!("{name}-mix"));
        check_mix(name, m);
        // The fill allocated the span; the mix's trims (QD 8 x 4 KiB of them may still have
        // been in flight at its end) are the only holes in it.
        let holes = (empty + span).saturating_sub(mixed);
        let mix_trimmed = m["trim"]["bytes"].as_u64().unwrap_or(0) + (32 << 10);
        assert!(
            holes <= mix_trimmed && mixed <= empty + span + (1 << 20),
            "{name}: {empty} -> {mixed} bytes after the fill and a mix that trimmed {mix_trimmed}"
        );
        let r = c.ok(&format!("{name}-trim"));
        let t = r["trim"]["bytes"].as_u64().unwrap_or(0);
        assert!(ios(r, "trim") > 0 && ios(r, "write") == 0, "{name}: {r}");
        // Sequential 64 KiB trims from the span's start: what they covered is the bytes
        // trimmed, or the whole span once they wrapped; plus the QD 4 x 64 KiB in flight when
        // the window closed (carried out, not counted), within the 1 MiB allowed above.
        // What the mix had already punched in that range is not given back twice.
        let want = t.min(span);
        let drop = mixed.saturating_sub(trimmed);
        assert!(
            drop + holes + want / 10 + (64 << 10) >= want && drop <= want + (1 << 20),
            "{name}: trimmed {t} bytes ({want} of the span), the file gave back {drop} ({mixed} -> {trimmed}, {holes} in holes before)"
        );
        eprintln!(
            "{name:<6} trim pass: {} trims, {:.0} trim IOPS (TCG), {t} B trimmed, file {mixed} -> {trimmed} B",
            ios(r, "trim"),
            r["trim"]["iops"].as_f64().unwrap_or(0.0)
        );
        eprintln!(
            "{name:<6} verified mix: {:.0} IOPS (TCG), trim {:.0}, write-zeroes {:.0}, lbprz {}, dlfeat {}",
            m["iops"].as_f64().unwrap_or(0.0),
            m["trim"]["iops"].as_f64().unwrap_or(0.0),
            m["write_zeroes"]["iops"].as_f64().unwrap_or(0.0),
            m["info"]["params"]["lbprz"],
            m["info"]["params"]["dlfeat"]
        );
    }
    let lp = &c.ok("lio-mix")["info"]["params"];
    assert_eq!(lp["trim_by"], "UNMAP", "{lp}");
    assert_eq!(lp["lbprz"], true, "unmap_zeroes_data=1 is LBPRZ: {lp}");
    assert_eq!(lp["write_zeroes_by"], "WRITE SAME(16)", "{lp}");
    // A LUN without thin provisioning nor WRITE SAME: the trim and the write-zeroes refused
    // before any I/O (the fill included), in one line each.
    for (run, op) in [("thick-trim", "trim"), ("thick-wz", "zero")] {
        assert_eq!(c.rc.get(run).map(String::as_str), Some("2"), "{}", c.text);
        let err = c.prefixed(&format!("OUT {run} "));
        assert_eq!(err.len(), 1, "one line: {err:?}");
        assert!(
            err[0].contains("does not offer") && err[0].contains(op),
            "{err:?}"
        );
    }
    assert_eq!(c.alloc("thick", "after"), 0, "a refused run wrote");

    // 2. Passthrough beside the block layer on the kernel's own transports.
    for (name, engine) in [("ng", "nvme-ng"), ("nb", ""), ("sg", "sg"), ("sd", "")] {
        let r = c.ok(name);
        if !engine.is_empty() {
            assert_eq!(r["engine"], engine, "{r}");
        }
        check_mix(name, r);
        eprintln!(
            "{name}: verified mix {:.0} IOPS (TCG) on {}",
            r["iops"].as_f64().unwrap_or(0.0),
            r["target"]
        );
    }
    for (cmp, pt) in [("cmp-nvme", "nvme-ng"), ("cmp-scsi", "sg")] {
        assert_eq!(c.rc.get(cmp).map(String::as_str), Some("0"), "{}", c.text);
        let engines = c.prefixed(&format!("CMP-ENGINE {cmp} "));
        assert!(
            engines.iter().any(|e| e.contains(&format!("\"{pt}\"")))
                && engines.iter().any(|e| e.contains("io_uring")),
            "{cmp} ran both: {engines:?}"
        );
        // The report's tables have a row for each side.
        let rows = c.prefixed(&format!("CMP-ROW {cmp} "));
        for t in ["block", "passthrough"] {
            assert!(
                rows.iter().any(|r| r.contains(&format!("| {t} |"))),
                "{cmp}: no row of {t} in {rows:?}"
            );
        }
        // And what the block layer cost: the block device against its passthrough device
        // (paired by the manifests), a row per workload.
        assert!(
            rows.iter()
                .any(|r| r.contains("| block / passthrough |") && r.contains(" µs")),
            "{cmp}: no block layer row in {rows:?}"
        );
        for r in rows {
            eprintln!("{cmp}: {r}");
        }
    }

    // 3. The blktrace recorded in the guest, replayed on the host.
    let recorded = queued(&c.prefixed("BT-TXT "));
    let count = |op| recorded.iter().filter(|i| i.0 == op).count();
    assert!(
        count(0) > 0 && count(1) > 0 && count(2) > 0,
        "{recorded:?}\n{}",
        c.text
    );
    let b64 = dir.join("nvme.blktrace.0.b64");
    std::fs::write(&b64, c.prefixed("BT-BIN ").join("\n")).unwrap();
    let bin = Command::new("base64").arg("-d").arg(&b64).output().unwrap();
    assert!(bin.status.success(), "base64 -d of the trace");
    let bin = bin.stdout;
    let size: usize = c.prefixed("BT-END ")[0].trim().parse().unwrap();
    assert_eq!(bin.len(), size, "the trace came out whole");
    let bt = dir.join("nvme.blktrace.0");
    std::fs::write(&bt, &bin).unwrap();
    let txt = dir.join("nvme.blkparse.txt");
    std::fs::write(&txt, c.prefixed("BT-TXT ").join("\n")).unwrap();
    for trace in [&bt, &txt] {
        let o = Command::new(env!("CARGO_BIN_EXE_sanbench"))
            .arg("replay")
            .arg(trace)
            .args(["mem:64M", "--afap", "--qd", "4", "--json", "-", "-q"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let p = &doc["results"][0]["replay"];
        for (k, name) in ["read", "write", "trim"].iter().enumerate() {
            let mine: Vec<_> = recorded.iter().filter(|i| i.0 as usize == k).collect();
            let bytes: u64 = mine.iter().map(|i| i.2).sum();
            assert_eq!(
                p["trace_ops"][name].as_u64(),
                Some(mine.len() as u64),
                "{name}: {p}"
            );
            assert_eq!(
                p["replayed_ops"][name].as_u64(),
                Some(mine.len() as u64),
                "{name}: {p}"
            );
            assert_eq!(
                p["replayed_bytes"][name].as_u64(),
                Some(bytes),
                "{name}: {p}"
            );
        }
        assert_eq!(p["complete"], true, "{p}");
        assert_eq!(
            p["issued_digest"].as_str(),
            Some(digest(&recorded).as_str()),
            "{p}"
        );
    }
    eprintln!(
        "blktrace: {} B, {} reads, {} writes, {} trims queued, replayed from binary and text",
        bin.len(),
        count(0),
        count(1),
        count(2)
    );
    figures(&c);
}
