//! The passthrough engines against the real kernel, in one QEMU TCG guest (testkit::vm): an
//! emulated NVMe controller (QEMU `-device nvme` over a small raw file) gives `/dev/nvme0n1`
//! and its generic device `/dev/ng0n1`; scsi_debug (thin provisioned: LBPU, LBPWS) gives a
//! disk, its `/dev/sgN` and its bsg node. Inside, sanbench runs a read/write/trim/write-zeroes
//! mix with `--verify` through each passthrough device; data written through a block device is read
//! back and checked through its passthrough device and the other way round (`sanbench
//! verify --run-id`); the block device and its passthrough device carry the same transport
//! label in the manifest; `compare` runs a block device beside its passthrough device; a
//! device whose block device holds a filesystem is refused (exit 2), and so are bad URIs.
//! Then, in the same boot, the kernel's own targets (kernel_targets/: trim and write-zeroes
//! into nvmet and LIO, passthrough on the kernel's NVMe/TCP host and tcm_loop, blktrace). The
//! guest's figures are emulated-CPU (TCG) figures, nothing here is a performance claim.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sanbench_testkit::vm;
use serde_json::Value;

mod kernel_targets;

const SCRIPT: &str = r#"
SB=/tmp/sanbench
for i in $(seq 1 100); do [ -e /dev/ng0n1 ] && ls /sys/class/scsi_generic/*/device/block > /dev/null 2>&1 && break; sleep 0.2; done
SG=""; for s in /sys/class/scsi_generic/*; do [ -d $s/device/block ] && SG=/dev/${s##*/} && SD=/dev/$(ls $s/device/block) && break; done
HCTL=""; [ -n "$SG" ] && HCTL=$(basename $(readlink -f /sys/class/scsi_generic/${SG##*/}/device))
BSG=/dev/bsg/$HCTL
echo "DEVS $SG $SD $BSG at $(cut -d' ' -f1 /proc/uptime) s"
[ -c "$BSG" ] || echo "FAIL no bsg node $BSG"
[ -e /dev/ng0n1 ] || echo "FAIL no /dev/ng0n1"
[ -n "$SG" ] || echo "FAIL no sg disk"
out() { echo "RC $1 $2 at $(cut -d' ' -f1 /proc/uptime) s"; sed "s/^/OUT $1 /" /tmp/$1.out; [ -f /tmp/$1.json ] && echo "JSON $1 $(tr -d '\n' < /tmp/$1.json)"; }
# The verified mix through each passthrough device; each block device's transport label as
# `sanbench monitors` names it.
mix() { rm -f /tmp/$1.json
  $SB run $2 --read 40 --trim 10 --write-zeroes 10 --bs 4k --qd 8 --time 1s --ramp 0 --size 4M \
    --precondition fill --verify --quiet --json /tmp/$1.json > /tmp/$1.out 2>&1; out $1 $?; }
mix ng nvme-ng:/dev/ng0n1
mix sg sg:$SG
mix bsg bsg:$BSG
# sg's queue on the driver's write/read interface (the default) against a thread per slot in
# SG_IO, beside the disk's block device: random 4 KiB reads at QD 8, interleaved (TCG figures).
ab() { $SB run $2 --read 100 --bs 4k --qd 8 --time 500ms --ramp 0 --size 4M --quiet \
    --json /tmp/ab.json > /dev/null 2>&1
  echo "AB $1 $? $(grep -o '"iops": *[0-9.e+]*' /tmp/ab.json | head -1 | tr -d ' ')"; }
for i in 1 2; do ab sd $SD; ab sg sg:$SG; SANBENCH_SG_QUEUE=threads ab sg-threads sg:$SG; done
# Trims alone at QD 8: a submit's trims go as one DSM / UNMAP (the queues count commands per
# trim). Write-zeroes of 2 MiB, above one transfer (QEMU's MDTS): split by the engine.
trims() { rm -f /tmp/$1.json
  $SB run $2 --read 0 --trim 100 --bs 4k --qd 8 --time 1s --ramp 0 --size 4M \
    --quiet --json /tmp/$1.json > /tmp/$1.out 2>&1; out $1 $?; }
trims ng-trim nvme-ng:/dev/ng0n1
trims sg-trim sg:$SG
rm -f /tmp/ng-wz.json
$SB run nvme-ng:/dev/ng0n1 --read 50 --write-zeroes 50 --read-bs 4k --write-bs 2m --qd 1 --time 1s \
  --ramp 0 --size 8M --precondition fill --verify --quiet --json /tmp/ng-wz.json > /tmp/ng-wz.out 2>&1
out ng-wz $?
# A medium error (scsi_debug's, on reads of LBA 0x1234..): the run's error line says what the
# device said.
echo 2 > /sys/bus/pseudo/drivers/scsi_debug/opts || echo "FAIL scsi_debug opts"
for u in sg:$SG bsg:$BSG; do
  $SB run $u --read 100 --random 0 --bs 64k --qd 1 --time 3s --ramp 0 --size 4M --quiet > /tmp/me.out 2>&1
  echo "MEDIUM $? $u :: $(tr '\n' ' ' < /tmp/me.out)"; done
echo 0 > /sys/bus/pseudo/drivers/scsi_debug/opts
$SB monitors /dev/nvme0n1 $SD > /tmp/monitors.out 2>&1 || echo "FAIL monitors"
grep '^device ' /tmp/monitors.out | sed 's/^/SB-/'
# Written through one, read back and checked through the other (--verify: the fill carries
# the run's id too, so every unit must hold this run's data).
cross() { rm -f /tmp/$1.json
  $SB run $2 --read 0 --bs 64k --qd 4 --time 300ms --ramp 0 --size 4M --precondition fill --verify \
    --quiet --json /tmp/$1.json > /tmp/$1.out 2>&1; out $1 $?
  ID=$(grep -o '"run_id": *"[0-9a-f]*"' /tmp/$1.json | head -1 | sed 's/.*"\([0-9a-f]*\)"$/\1/')
  rm -f /tmp/$1-v.json
  $SB verify $3 --run-id $ID --span 4M --json /tmp/$1-v.json > /tmp/$1-v.out 2>&1; out $1-v $?; }
cross blk-to-ng /dev/nvme0n1 nvme-ng:/dev/ng0n1
cross ng-to-blk nvme-ng:/dev/ng0n1 /dev/nvme0n1
cross sd-to-sg $SD sg:$SG
cross sg-to-sd sg:$SG $SD
cross bsg-to-sg bsg:$BSG sg:$SG
# The block device beside its passthrough device.
rm -rf /tmp/cmp
$SB compare --suite /etc/pt.toml --repeat 2 --baseline 0 --no-store --quiet --out /tmp/cmp \
  block=/dev/nvme0n1 passthrough=nvme-ng:/dev/ng0n1 > /tmp/cmp.out 2>&1
out cmp $?
grep -o '"engine": *"[^"]*"' /tmp/cmp/results.json | sort -u | sed 's/^/CMP-ENGINE /'
# Bad URIs, and a filesystem on the block device behind each passthrough device.
# (what the parser refuses is unit-tested in crates/units; here, one of it and the devices)
for u in nvme-ng: nvme-ng:/dev/null sg:/dev/nvme0n1 nvme-ng:/dev/sda bsg:/dev/ng0n1; do
  $SB run "$u" --read 100 --time 100ms --ramp 0 --quiet > /tmp/bad.out 2>&1
  echo "BAD $? $u :: $(head -c 300 /tmp/bad.out | tr '\n' ' ')"; done
mke2fs -q /dev/nvme0n1 > /dev/null 2>&1 || echo "FAIL mke2fs nvme"
mke2fs -q $SD > /dev/null 2>&1 || echo "FAIL mke2fs sd"
for u in nvme-ng:/dev/ng0n1 sg:$SG bsg:$BSG; do
  $SB run $u --read 50 --time 200ms --ramp 0 --size 4M --quiet > /tmp/fs.out 2>&1
  echo "FS $? $u :: $(tr '\n' ' ' < /tmp/fs.out)"; done
$SB run nvme-ng:/dev/ng0n1 --read 100 --time 200ms --ramp 0 --size 4M --quiet > /tmp/fs.out 2>&1
echo "FSREAD $? :: $(tr '\n' ' ' < /tmp/fs.out)"
echo "END at $(cut -d' ' -f1 /proc/uptime) s"
"#;

/// The comparison's suite: random 4 KiB reads at QD 4, shortened to fit a TCG guest.
const SUITE: &str = r#"name = "passthrough"
description = "a block device beside its passthrough device in a QEMU TCG guest: emulated-CPU figures, not performance figures"
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

fn json_of<'a>(runs: &'a BTreeMap<String, Value>, name: &str, console: &str) -> &'a Value {
    runs.get(name)
        .unwrap_or_else(|| panic!("no result of {name}\n{console}"))
}

#[test]
fn passthrough_engines_and_kernel_targets_in_the_guest() {
    let started = Instant::now();
    let (k, vmlinuz) = vm::kernel();
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("initrd");
    let sb = vm::stripped_sanbench(env!("CARGO_BIN_EXE_sanbench"), dir.path());
    let image = dir.path().join("nvme.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    // This test's part, then kernel_targets's, which finds its devices beside this part's.
    let script = format!("{SCRIPT}\n{}", kernel_targets::SCRIPT)
        .replace("SB=/tmp/sanbench", &format!("SB={}", sb.display()));
    let mut bins = vec![sb.display().to_string()];
    bins.extend(kernel_targets::programs());
    let kt_files = kernel_targets::files();
    let mut files: Vec<(&str, &[u8])> = vec![("etc/pt.toml", SUITE.as_bytes())];
    files.extend(kt_files.iter().map(|(p, b)| (*p, b.as_slice())));
    vm::build_initramfs_with(
        &initrd,
        &k,
        &[
            &["nvme", "sd_mod", "sg", "scsi_debug"][..],
            kernel_targets::MODULES,
        ]
        .concat(),
        // Thin provisioned (LBPME with UNMAP and WRITE SAME(16) UNMAP), unmapped blocks read
        // as zeros (lbprz's default).
        &[
            ("scsi_debug", "dev_size_mb=16 lbpu=1 lbpws=1"),
            kernel_targets::PARAMS,
        ],
        &script,
        &bins.iter().map(String::as_str).collect::<Vec<_>>(),
        &files,
    );
    let mut g = vm::Vm::boot_with(
        &vmlinuz,
        &initrd,
        &[],
        &[],
        &vm::nvme_drive(&image, "sbpt0"),
    );
    let whole = g.wait_for("SANBENCH-VM-DONE", Duration::from_secs(600));
    drop(g);
    let log =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("passthrough_guest_console.log");
    std::fs::write(&log, &whole).unwrap();
    eprintln!(
        "guest console: {} (done at {:.0} s)",
        log.display(),
        started.elapsed().as_secs_f64()
    );
    // Each part's checks read what it printed (their run names overlap).
    let at = whole.find(kernel_targets::MARKER).unwrap_or(whole.len());
    let (console, kt) = (whole[..at].to_string(), whole[at..].to_string());
    passthrough_checks(&console);
    kernel_targets::check(kt, dir.path());
    eprintln!(
        "passthrough guest test: {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

/// What the guest printed before kernel_targets's part, checked.
fn passthrough_checks(console: &str) {
    let fails: Vec<&str> = console.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(fails.is_empty(), "{fails:?}\n{console}");
    // `RC NAME CODE at UPTIME s`
    let rc: BTreeMap<&str, &str> = console
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("RC ")?.split_whitespace();
            Some((w.next()?, w.next()?))
        })
        .collect();
    let mut runs: BTreeMap<String, Value> = BTreeMap::new();
    for l in console.lines() {
        let Some((name, json)) = l.strip_prefix("JSON ").and_then(|r| r.split_once(' ')) else {
            continue;
        };
        let v: Value = serde_json::from_str(json.trim())
            .unwrap_or_else(|e| panic!("{name}: {e}: {json}\n{console}"));
        runs.insert(name.to_string(), v);
    }
    // Every run and every cross-check succeeded.
    for name in [
        "ng",
        "sg",
        "blk-to-ng",
        "blk-to-ng-v",
        "ng-to-blk",
        "ng-to-blk-v",
        "sd-to-sg",
        "sd-to-sg-v",
        "sg-to-sd",
        "sg-to-sd-v",
        "bsg-to-sg",
        "bsg-to-sg-v",
        "ng-trim",
        "sg-trim",
        "ng-wz",
        "cmp",
    ] {
        assert_eq!(rc.get(name), Some(&"0"), "{name}\n{console}");
    }
    // The verified mixes: every op carried out, nothing bad read back, the engine named.
    for (name, engine) in [("ng", "nvme-ng"), ("sg", "sg"), ("bsg", "bsg")] {
        let r = &json_of(&runs, name, console)["results"][0];
        assert_eq!(r["engine"], engine, "{r}");
        for op in ["read", "write", "trim", "write_zeroes"] {
            let n = r[op]["ios"].as_u64().unwrap_or(0);
            assert!(n > 0, "{name}: no {op}: {r}");
        }
        let v = &r["verify"];
        assert!(v["units"].as_u64().unwrap_or(0) > 0, "{name}: {v}");
        let bad = v["bad"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: {v}"));
        assert!(bad.values().all(|n| n.as_u64() == Some(0)), "{name}: {v}");
        let p = &r["info"]["params"];
        assert!(
            p["block_device"]
                .as_str()
                .is_some_and(|d| d.starts_with("/dev/")),
            "{p}"
        );
    }
    // sg ran on the driver's write/read interface, without threads; bsg on its threads.
    let q = |name: &str| json_of(&runs, name, console)["results"][0]["queues"][0].clone();
    assert_eq!(q("sg")["queue"], "sg write/read", "{}", q("sg"));
    assert_eq!(q("sg")["threads"], 0, "{}", q("sg"));
    assert!(q("bsg")["threads"].as_u64() > Some(0), "{}", q("bsg"));
    let ab: Vec<&str> = console.lines().filter(|l| l.starts_with("AB ")).collect();
    eprintln!("random 4 KiB reads at QD 8 (TCG, not a performance figure): {ab:?}");
    assert_eq!(ab.len(), 6, "{console}");
    assert!(
        ab.iter().all(|l| l.split(' ').nth(2) == Some("0")),
        "{ab:?}"
    );
    // A submit's trims went as one command: fewer commands than trims at QD 8.
    for name in ["ng-trim", "sg-trim"] {
        let r = &json_of(&runs, name, console)["results"][0];
        let sum = |k: &str| -> u64 {
            r["queues"]
                .as_array()
                .map(|q| q.iter().filter_map(|m| m[k].as_u64()).sum())
                .unwrap_or(0)
        };
        let (trims, cmds) = (sum("trims"), sum("trim_commands"));
        assert!(
            trims > 0 && r["trim"]["ios"].as_u64() > Some(0),
            "{name}: {r}"
        );
        let per = cmds as f64 / trims as f64;
        eprintln!("{name}: {trims} trims in {cmds} commands ({per:.2} a trim)");
        assert!(
            cmds > 0 && per < 1.0,
            "{name}: {cmds} commands for {trims} trims: {r}"
        );
    }
    // Write-zeroes larger than a transfer ran, verified, each as the commands its limit asks.
    {
        let r = &json_of(&runs, "ng-wz", console)["results"][0];
        let max = r["info"]["params"]["write_zeroes_max_blocks"]
            .as_u64()
            .unwrap_or_else(|| panic!("no write_zeroes_max_blocks: {r}"));
        let block = r["info"]["block_size"].as_u64().unwrap_or(512);
        let per = ((2u64 << 20) / block).div_ceil(max);
        let q = r["queues"].as_array().unwrap_or_else(|| panic!("{r}"));
        let wz: u64 = q.iter().filter_map(|m| m["write_zeroes"].as_u64()).sum();
        let cmds: u64 = q
            .iter()
            .filter_map(|m| m["write_zeroes_commands"].as_u64())
            .sum();
        assert!(
            wz > 0 && cmds == wz * per,
            "{wz} write-zeroes in {cmds} commands, {per} each: {r}"
        );
        eprintln!("ng-wz: {wz} write-zeroes of 2 MiB in {cmds} commands ({max} blocks a command)");
        let bad = r["verify"]["bad"]
            .as_object()
            .unwrap_or_else(|| panic!("{r}"));
        assert!(bad.values().all(|n| n.as_u64() == Some(0)), "{r}");
    }
    // A device failure: the run fails (exit 1) and its error line carries the decoded sense.
    let medium: Vec<&str> = console
        .lines()
        .filter(|l| l.starts_with("MEDIUM "))
        .collect();
    assert_eq!(medium.len(), 2, "{console}");
    for l in medium {
        assert!(
            l.starts_with("MEDIUM 1 ")
                && l.contains("MEDIUM ERROR")
                && l.contains("unrecovered read error"),
            "{l}"
        );
    }
    // What the other path wrote was read back whole: every unit held that run's data.
    for name in [
        "blk-to-ng-v",
        "ng-to-blk-v",
        "sd-to-sg-v",
        "sg-to-sd-v",
        "bsg-to-sg-v",
    ] {
        let v = &json_of(&runs, name, console)["targets"][0]["verify"];
        let (units, unit) = (v["units"].as_u64(), v["unit"].as_u64().unwrap_or(0));
        assert_eq!(units.map(|u| u * unit), Some(4 << 20), "{name}: {v}");
        let bad = v["bad"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: {v}"));
        assert!(bad.values().all(|n| n.as_u64() == Some(0)), "{name}: {v}");
    }
    // The passthrough target is labelled with its block device's transport, as `sanbench
    // monitors` names that device.
    let monitors: BTreeMap<&str, &str> = console
        .lines()
        .filter_map(|l| l.strip_prefix("SB-device ")?.split_once(": "))
        .collect();
    for pt in ["ng", "sg", "bsg"] {
        let p = &json_of(&runs, pt, console)["results"][0]["info"]["params"];
        let dev = p["block_device"].as_str().unwrap_or_default();
        let label = p["transport"]["label"]
            .as_str()
            .unwrap_or_else(|| panic!("{pt}: no transport label: {p}"));
        let m = monitors
            .get(dev)
            .unwrap_or_else(|| panic!("monitors named no {dev}\n{console}"));
        assert!(m.starts_with(label), "{pt}: {label:?} vs monitors {m:?}");
    }
    let engines: Vec<&str> = console
        .lines()
        .filter_map(|l| l.strip_prefix("CMP-ENGINE "))
        .collect();
    assert!(
        engines.iter().any(|e| e.contains("nvme-ng"))
            && engines.iter().any(|e| e.contains("io_uring")),
        "compare ran both: {engines:?}\n{console}"
    );
    // Bad URIs and devices: one line, exit 2.
    let bad: Vec<&str> = console.lines().filter(|l| l.starts_with("BAD ")).collect();
    assert_eq!(bad.len(), 5, "{console}");
    for l in &bad {
        assert!(l.starts_with("BAD 2 "), "{l}\n{console}");
    }
    // A filesystem on the block device: writes refused (exit 2, naming it), reads run.
    let fs: Vec<&str> = console.lines().filter(|l| l.starts_with("FS ")).collect();
    assert_eq!(fs.len(), 3, "{console}");
    for l in fs {
        assert!(
            l.starts_with("FS 2 ") && l.contains("refusing") && l.contains("ext2/3/4 filesystem"),
            "{l}"
        );
    }
    let reads: Vec<&str> = console
        .lines()
        .filter(|l| l.starts_with("FSREAD "))
        .collect();
    assert_eq!(reads.len(), 1, "{console}");
    for l in reads {
        assert!(l.starts_with("FSREAD 0 "), "{l}");
    }
}
