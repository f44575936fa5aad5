//! The kernel's multipath as the peer (issue 23), in one QEMU TCG guest (testkit::vm) against
//! sanbench's own servers on the host: `serve iscsi` and `serve nvme`, each with two portals
//! (one store, one LU identity), reached from the guest through two host ports each, the
//! second through a testkit `Forwarder`. In the guest: Linux's dm-multipath (a `dmsetup`
//! table, round-robin, `queue_if_no_path`) over two open-iscsi sessions, and NVMe native
//! multipath (one namespace head, two nvme-tcp controllers, iopolicy round-robin). sanbench
//! runs inside on each multipath device with `--verify`; 1-2 s into its measured window the
//! host silences the forwarder (a pulled cable: nothing closed, nothing carried), and the
//! result's `disruption` measures the kernel's stall. The manifest must label the device as
//! multipath with both paths. Beside each, sanbench's own multipath initiator runs from the
//! same guest over the same two portals (the second through a forwarder of its own) with the
//! same cut, so the two failovers are measured alike. Figures are emulated-CPU (TCG)
//! figures: correctness, not performance. docs/BENCHMARKS.md, "Multipath", has the figures
//! and the command.

use std::time::{Duration, Instant};

use sanbench_testkit::{vm, Forwarder, Served};
use serde_json::Value;

/// The guest's settings that bound the kernel's stall (stated with the figures):
/// open-iscsi pings a connection that received nothing for 2 s and gives the NOP-In 5 s
/// (its default; shorter ones failed both healthy sessions on a loaded host), then the
/// session's I/O is failed to dm-multipath 5 s later (replacement_timeout, as multipath
/// setups shorten it from 120 s); nvme-tcp's keep-alive timeout is the kernel's default.
const ISCSI_NOOP_INTERVAL_S: u32 = 2;
const ISCSI_NOOP_TIMEOUT_S: u32 = 5;
const ISCSI_REPLACEMENT_S: u32 = 5;
const NVME_KATO_S: u32 = 5;
/// sanbench's own initiator: a path with I/O out and nothing back for this long is failed.
const OWN_PATH_TIMEOUT_S: u32 = 2;
/// The measured windows (the kernel's, long enough for its timers in turn with room to
/// spare; sanbench's own), and when in them the path is cut.
const RUN_S: u32 = 24;
const OWN_RUN_S: u32 = 8;
const CUT_AFTER: Duration = Duration::from_millis(1500);

const SCRIPT: &str = r#"
export PATH=/bin:/usr/sbin:/usr/bin   # sanbench runs ethtool and dmsetup (busybox's ip first)
SB=/tmp/sanbench
SEEN=""
# The next block device that was not there before (hidden NVMe path devices left out).
newdisk() { for i in $(seq 1 150); do for d in $(ls /sys/block); do case " $SEEN " in *" $d "*) ;; *)
  case $d in nvme*c*) ;; sd*|nvme*n*) echo $d; return;; esac;; esac; done; sleep 0.2; done; }
found() { SEEN="$SEEN $2"; echo "DEV $1 $2"; }
# What sysfs has, for the monitor's fixtures (crates/monitor/tests/fixtures/make_guest_mp.py).
show() { for p in "$@"; do if [ -L $p ]; then echo "SYSFS $p -> $(readlink -f $p)";
  elif [ -f $p ]; then echo "SYSFS $p = $(cat $p 2>/dev/null | head -1)"; else echo "SYSFS $p: $(ls $p 2>&1 | tr '\n' ' ')"; fi; done; }
# measure KIND TARGET SECONDS: for a block device its manifest first; then a verified run
# whose window the host watches (the metrics endpoint's first I/Os counted) to cut a path.
measure() {
  case $2 in /dev/*)
    $SB monitors $2 > /tmp/mon.out 2>&1 || { echo "FAIL monitors $1"; cat /tmp/mon.out; }
    grep '^device ' /tmp/mon.out | sed "s/^/SB-MON $1 /";; esac
  $SB run "$2" --read 50 --bs 4k --qd 8 --time $3s --ramp 0 --size 8M --precondition fill \
    --verify --log-interval 100ms --metrics-listen 9100 --quiet --json /tmp/$1.json > /tmp/$1.out 2>&1 &
  P=$!
  for i in $(seq 1 900); do kill -0 $P 2>/dev/null || break; wget -qO- http://127.0.0.1:9100/metrics \
    2>/dev/null | grep -q '^sanbench_ios_total{[^}]*} [1-9]' && break; sleep 0.1; done
  echo "SB-WINDOW $1 $(cut -d' ' -f1 /proc/uptime)"
  wait $P; echo "SB-RC $1 $?"
  sed "s/^/SB-OUT $1 /" /tmp/$1.out | tail -30
  echo "SB-JSON $1 $(tr -d '\n' < /tmp/$1.json)"
}
OWN="policy=round-robin&path_timeout=OWN_PTs"

# --- dm-multipath over two open-iscsi sessions to `serve iscsi`'s two portals.
mkdir -p /etc/iscsi/nodes /etc/iscsi/send_targets /var/lib/iscsi /run/lock/iscsi /var/lock/iscsi
echo "InitiatorName=iqn.2026-11.io.sanbench:guest" > /etc/iscsi/initiatorname.iscsi
printf 'iscsid.startup = /bin/true\nnode.startup = manual\nnode.session.timeo.replacement_timeout = REPL\nnode.conn[0].timeo.noop_out_interval = NOOPI\nnode.conn[0].timeo.noop_out_timeout = NOOPT\n' > /etc/iscsi/iscsid.conf
/usr/sbin/iscsid -f > /tmp/iscsid.log 2>&1 &
sleep 1
for p in 3260 3261; do
  iscsiadm -m node -o new -T IQN -p 10.0.2.100:$p > /dev/null || echo "FAIL iscsi node $p"
  iscsiadm -m node -T IQN -p 10.0.2.100:$p --login > /dev/null || echo "FAIL iscsi login $p"
  found iscsi-$p $(newdisk)
done
iscsiadm -m node -T IQN -p 10.0.2.100:3261 | grep -E 'timeo\.(replacement|noop)' | sed 's/^/SB-ISCSI-CONF /'
set -- $SEEN; A=$1; B=$2
for d in $A $B; do echo "ISCSI-PATH $d dev=$(cat /sys/block/$d/dev) wwid=$(cat /sys/block/$d/device/wwid)"; done
S=$(cat /sys/block/$A/size)
dmsetup create mpatha --uuid mpath-sanbench-iscsi \
  --table "0 $S multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 $(cat /sys/block/$A/dev) 1 $(cat /sys/block/$B/dev) 1" \
  || echo "FAIL dmsetup create"
DM=$(ls /sys/block/$A/holders | head -1); echo "DEV dm-multipath $DM"
echo "DM-TABLE $(dmsetup table mpatha)"; echo "DM-STATUS $(dmsetup status mpatha)"
show /sys/class/block/$DM /sys/block/$DM/dm /sys/block/$DM/dm/name /sys/block/$DM/dm/uuid /sys/block/$DM/slaves \
  /sys/block/$DM/slaves/$A /sys/block/$DM/dev /sys/block/$DM/size /sys/class/block/$A /sys/class/block/$B
for s in /sys/class/iscsi_session/session*; do show $s $s/targetname $s/state $s/recovery_tmo; done
for c in /sys/class/iscsi_connection/connection*; do show $c $c/persistent_address $c/persistent_port; done
measure iscsi /dev/$DM RUN_S
echo "DM-STATUS-AFTER $(dmsetup status mpatha)"
for s in /sys/class/iscsi_session/session*; do echo "ISCSI-SESSION-AFTER $s $(cat $s/state)"; done
dmesg | grep -iE 'multipath|device-mapper|connection|iscsi|session' | tail -20 | sed 's/^/DMESG /'
# sanbench's own multipath initiator, the same two portals (the second's own forwarder).
measure iscsi-own "iscsi://10.0.2.100:3260,10.0.2.100:3262/IQN/0?$OWN" OWN_RUN_S

# --- NVMe native multipath: two nvme-tcp controllers to `serve nvme`'s two ports.
N=nqn.2026-11.io.sanbench:ram
for p in 4420 4421; do
  echo "transport=tcp,traddr=10.0.2.100,trsvcid=$p,nqn=$N,keep_alive_tmo=KATO" > /dev/nvme-fabrics \
    || echo "NVME-CONNECT-FAILED $p"
done
sleep 1
for c in /sys/class/nvme/nvme*; do show $c $c/address $c/state $c/cntlid $c/transport $c/subsysnqn; done
ls /sys/block | tr '\n' ' ' | sed 's/^/BLOCK /'; echo
for s in /sys/class/nvme-subsystem/*; do show $s $s/iopolicy $s; done
H=$(ls /sys/block | grep -E '^nvme[0-9]+n[0-9]+$' | head -1)
NP=$(ls -d /sys/block/nvme*c*n* 2>/dev/null | wc -l)
echo "NVME-HEAD ${H:-none} paths=$NP"
if [ -n "$H" ] && [ "$NP" -ge 2 ]; then
  SS=$(readlink -f /sys/class/block/$H); SS=${SS%/*}
  echo round-robin > $SS/iopolicy
  for p in /sys/block/nvme*c*n*; do show $(readlink -f $p) $p/ana_state $p/dev $p/device; done
  show /sys/class/block/$H $SS/iopolicy
  echo "DEV nvme-multipath $H"
  measure nvme /dev/$H RUN_S
  for c in /sys/class/nvme/nvme*; do echo "NVME-CTRL-AFTER $c $(cat $c/state)"; done
  for p in /sys/block/nvme*c*n*; do echo "NVME-PATH-AFTER $p $(cat $p/ana_state)"; done
else
  echo "SB-SKIP nvme"
fi
dmesg | grep -iE 'nvme' | tail -25 | sed 's/^/DMESG /'
measure nvme-own "nvme+tcp://10.0.2.100:4420,10.0.2.100:4422/$N/1?$OWN" OWN_RUN_S
"#;

/// `sanbench serve KIND` with two loopback portals; returns it and its portals.
fn serve2(kind: &str) -> (Served, Vec<String>) {
    let s = Served::start(
        assert_cmd::cargo::cargo_bin("sanbench"),
        &[
            kind,
            "--size",
            "32M",
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let portals: Vec<String> = s.addr().split(',').map(str::to_string).collect();
    assert_eq!(portals.len(), 2, "{}", s.line);
    (s, portals)
}

fn port(addr: &str) -> u16 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// Waits for the first of `markers` on the console; which one, and the console.
fn wait_any(g: &vm::Vm, markers: &[&str], timeout: Duration) -> (usize, String) {
    let end = Instant::now() + timeout;
    loop {
        let c = g.console();
        if let Some(i) = markers.iter().position(|m| c.contains(m)) {
            return (i, c);
        }
        assert!(
            Instant::now() < end,
            "guest never printed any of {markers:?}; console:\n{c}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kernel_multipath_path_cut_measured() {
    let started = Instant::now();
    let (k, vmlinuz) = vm::kernel();
    let (iscsi, ip) = serve2("iscsi");
    let (nvme, np) = serve2("nvme");
    // The second path of each goes through a forwarder the test silences: one for the
    // kernel's path, one for sanbench's own initiator's.
    let fwd = |to: &str| Forwarder::start(to.parse().unwrap());
    let (fi, fi_own, fnv, fnv_own) = (fwd(&ip[1]), fwd(&ip[1]), fwd(&np[1]), fwd(&np[1]));
    let iqn = iscsi
        .uri
        .split('/')
        .nth(3)
        .expect("the IQN in serve's URI")
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("initrd");
    let sb = vm::stripped_sanbench(env!("CARGO_BIN_EXE_sanbench"), dir.path());
    let script = SCRIPT
        .replace("SB=/tmp/sanbench", &format!("SB={}", sb.display()))
        .replace("IQN", &iqn)
        .replace("OWN_RUN_S", &OWN_RUN_S.to_string())
        .replace("RUN_S", &RUN_S.to_string())
        .replace("REPL", &ISCSI_REPLACEMENT_S.to_string())
        .replace("NOOPI", &ISCSI_NOOP_INTERVAL_S.to_string())
        .replace("NOOPT", &ISCSI_NOOP_TIMEOUT_S.to_string())
        .replace("KATO", &NVME_KATO_S.to_string())
        .replace("OWN_PT", &OWN_PATH_TIMEOUT_S.to_string());
    vm::build_initramfs_with(
        &initrd,
        &k,
        &[
            "crc32c_generic",
            "sd_mod",
            "iscsi_tcp",
            "dm_multipath",
            "dm_round_robin",
            "nvme-tcp",
        ],
        &[],
        &script,
        &[
            "/usr/sbin/ethtool",
            "/usr/sbin/iscsid",
            "/usr/sbin/iscsiadm",
            "/usr/sbin/dmsetup",
            &sb.display().to_string(),
        ],
        // iscsid looks up the user of every iscsiadm that talks to it.
        &[
            ("etc/passwd", b"root:x:0:0:root:/:/bin/sh\n"),
            ("etc/group", b"root:x:0:\n"),
        ],
    );
    let mut g = vm::Vm::boot(
        &vmlinuz,
        &initrd,
        &[],
        &[
            (3260, port(&ip[0])),
            (3261, fi.addr().port()),
            (3262, fi_own.addr().port()),
            (4420, port(&np[0])),
            (4421, fnv.addr().port()),
            (4422, fnv_own.addr().port()),
        ],
    );
    for (kind, fwd) in [
        ("iscsi", &fi),
        ("iscsi-own", &fi_own),
        ("nvme", &fnv),
        ("nvme-own", &fnv_own),
    ] {
        let (which, _) = wait_any(
            &g,
            &[
                &format!("SB-WINDOW {kind} "),
                &format!("SB-SKIP {kind}"),
                "SANBENCH-VM-DONE",
            ],
            Duration::from_secs(600),
        );
        if which != 0 {
            continue;
        }
        std::thread::sleep(CUT_AFTER);
        fwd.silence();
        eprintln!("{kind}: second path silenced");
    }
    let console = g.wait_for("SANBENCH-VM-DONE", Duration::from_secs(600));
    drop(g);
    let log =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_multipath_console.log");
    std::fs::write(&log, &console).unwrap();
    eprintln!("guest console: {}", log.display());
    drop((iscsi, nvme));
    eprintln!(
        "kernel multipath test: {:.0} s wall",
        started.elapsed().as_secs_f64()
    );
    let fails: Vec<&str> = console.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(fails.is_empty(), "{fails:?}\n{console}");
    check(&Kind::ISCSI, &console);
    check_own("iscsi-own", &console);
    check_own("nvme-own", &console);
    // The kernel makes one head of two controllers only when the target reports
    // multi-controller support (CMIC) and a shared namespace (NMIC), as `serve nvme` does
    // with ANA; without them it refuses the second ("Subsystem does not support multiple
    // controllers").
    assert!(
        !console.contains("SB-SKIP nvme"),
        "NVMe: no multipath head\n{console}"
    );
    check(&Kind::NVME, &console);
}

/// What differs between the two multipath stacks in the checks.
struct Kind {
    name: &'static str,
    label: &'static str,
    /// The longest stall: no shorter than the time the kernel gives a silent connection
    /// before it fails its I/O (until then every slot ends up stuck on the cut path, as
    /// round-robin sends half of each refill there), no longer than all its timers in turn,
    /// doubled (TCG on a loaded host).
    stall_ms: (f64, f64),
}

impl Kind {
    const ISCSI: Kind = Kind {
        name: "iscsi",
        label: "dm-multipath (2 paths, iSCSI)",
        stall_ms: (
            (ISCSI_NOOP_TIMEOUT_S * 1000) as f64,
            ((ISCSI_NOOP_INTERVAL_S + ISCSI_NOOP_TIMEOUT_S + ISCSI_REPLACEMENT_S) * 2000) as f64,
        ),
    };
    const NVME: Kind = Kind {
        name: "nvme",
        label: "NVMe/TCP multipath (2 paths)",
        // The keep-alive goes out every KATO and has KATO to come back.
        stall_ms: (
            (NVME_KATO_S * 1000) as f64 * 0.8,
            (NVME_KATO_S * 2 * 2000) as f64,
        ),
    };
}

/// The value after `PREFIX KIND ` on the console's first such line.
fn line<'a>(console: &'a str, prefix: &str, kind: &str) -> &'a str {
    let p = format!("{prefix} {kind} ");
    console
        .lines()
        .find_map(|l| l.strip_prefix(p.as_str()))
        .unwrap_or_else(|| panic!("no {p:?} line\n{console}"))
}

/// The second path (the one cut) and the first, by their portal port.
fn path_by_port<'a>(paths: &'a [Value], port: &str) -> &'a Value {
    paths
        .iter()
        .find(|p| {
            let t = &p["transport"];
            t["portal"]
                .as_str()
                .is_some_and(|a| a.ends_with(&format!(":{port}")))
                || t["address"].as_str().is_some_and(|a| {
                    a.contains(&format!("trsvcid={port},"))
                        || a.ends_with(&format!("trsvcid={port}"))
                })
        })
        .unwrap_or_else(|| panic!("no path through port {port} in {paths:?}"))
}

fn check(k: &Kind, console: &str) {
    let name = k.name;
    // `sanbench monitors` before the run: the device and both paths, both usable.
    let mon = line(console, "SB-MON", name);
    assert!(mon.contains(k.label), "{name}: {mon}");
    let mon: Value = serde_json::from_str(&mon[mon.find('{').unwrap()..]).unwrap();
    let before = mon["paths"].as_array().unwrap();
    assert_eq!(before.len(), 2, "{name}: {mon}");
    let (live, cut) = if name == "iscsi" {
        ("3260", "3261")
    } else {
        ("4420", "4421")
    };
    for port in [live, cut] {
        let p = path_by_port(before, port);
        if name == "iscsi" {
            assert_eq!(p["state"], "active", "{name}: {p}");
            assert_eq!(p["transport"]["state"], "LOGGED_IN", "{name}: {p}");
        } else {
            assert_eq!(p["ana_state"], "optimized", "{name}: {p}");
            assert_eq!(p["transport"]["state"], "live", "{name}: {p}");
        }
    }
    // The run completed (the kernel queued and failed over, never failed the I/O).
    assert_eq!(line(console, "SB-RC", name), "0", "{name}\n{console}");
    let v: Value = serde_json::from_str(line(console, "SB-JSON", name).trim()).unwrap();
    let r = &v["results"][0];
    assert!(
        r["verify"]["reads"].as_u64().unwrap_or(0) > 0,
        "{name}: {r}"
    );
    assert_eq!(
        r["verify"]["bad_blocks"],
        serde_json::json!([]),
        "{name}: {r}"
    );
    // The manifest, read when the run ended: multipath, both paths, the cut one out.
    let t = &r["info"]["params"]["transport"];
    assert_eq!(t["label"], k.label, "{name}: {t}");
    let tr = &t["transport"];
    let paths = tr["paths"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: {t}"));
    assert_eq!(paths.len(), 2, "{name}: {t}");
    let (pl, pc) = (path_by_port(paths, live), path_by_port(paths, cut));
    if name == "iscsi" {
        assert_eq!(tr["kind"], "dm_multipath", "{t}");
        assert_eq!(tr["selector"], "round-robin", "{t}");
        assert_eq!(
            tr["features"],
            serde_json::json!(["queue_if_no_path"]),
            "{t}"
        );
        assert!(paths.iter().all(|p| p["label"] == "iSCSI"), "{t}");
        assert_eq!(pl["state"], "active", "{t}");
        assert_eq!(pc["state"], "failed", "{t}");
        assert!(pc["fail_count"].as_u64().unwrap_or(0) >= 1, "{t}");
        assert_eq!(pl["transport"]["state"], "LOGGED_IN", "{t}");
        assert_ne!(pc["transport"]["state"], "LOGGED_IN", "{t}");
    } else {
        assert_eq!(tr["kind"], "nvme", "{t}");
        assert_eq!(tr["iopolicy"], "round-robin", "{t}");
        assert!(paths.iter().all(|p| p["label"] == "NVMe/TCP"), "{t}");
        assert_eq!(pl["transport"]["state"], "live", "{t}");
        assert_ne!(pc["transport"]["state"], "live", "{t}");
        assert_ne!(pl["device"], pc["device"], "{t}");
    }
    disruption(k.label, r, k.stall_ms, "stall");
}

/// sanbench's own initiator over the same two portals, the same cut.
fn check_own(kind: &str, console: &str) {
    assert_eq!(line(console, "SB-RC", kind), "0", "{kind}\n{console}");
    let v: Value = serde_json::from_str(line(console, "SB-JSON", kind).trim()).unwrap();
    let r = &v["results"][0];
    assert!(
        r["verify"]["reads"].as_u64().unwrap_or(0) > 0,
        "{kind}: {r}"
    );
    assert_eq!(
        r["verify"]["bad_blocks"],
        serde_json::json!([]),
        "{kind}: {r}"
    );
    let m = &r["multipath"];
    assert_eq!(m["policy"], "round-robin", "{kind}: {m}");
    assert_eq!(m["paths"].as_array().map(Vec::len), Some(2), "{kind}: {m}");
    assert!(m["reissued"].as_u64().unwrap_or(0) >= 1, "{kind}: {m}");
    let d = &r["disruption"];
    let events: Vec<&str> = d["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["event"].as_str())
        .collect();
    assert!(events.contains(&"failed"), "{kind}: {d}");
    assert!(events.contains(&"failed_over"), "{kind}: {d}");
    let pt = (OWN_PATH_TIMEOUT_S * 1000) as f64;
    let label = if kind == "iscsi-own" {
        "sanbench multipath (iSCSI)"
    } else {
        "sanbench multipath (NVMe/TCP)"
    };
    let bounds = (pt * 0.5, pt * 3.0 + 1000.0);
    disruption(label, r, bounds, "path");
    // The path failed by itself (no fault of sanbench's): its failure is put where it last
    // completed an I/O, so detection took about its path timeout.
    let detected = d["detected_ms"].as_f64().unwrap();
    assert!(
        detected >= bounds.0 && detected <= bounds.1,
        "{label}: detected after {detected} ms, outside {bounds:?}: {d}"
    );
}

/// The result's disruption: no fault of sanbench's, so a stall (a kernel device: sanbench
/// sees no paths) or the failed path (sanbench's own multipath) as `cause`, as long as the
/// initiator's timers make it (`bounds`, ms), after the cut (1.5 s past the window's first
/// I/Os), with I/O flowing again after it; printed for the docs.
fn disruption(label: &str, r: &Value, bounds: (f64, f64), cause: &str) {
    let d = &r["disruption"];
    assert_eq!(d["cause"], cause, "{label}: {r}");
    assert_eq!(d["bad_blocks"], 0, "{label}: {d}");
    let stall = d["stall_ms"].as_f64().unwrap();
    let start = d["stall_start_ms"].as_f64().unwrap();
    assert!(
        stall >= bounds.0 && stall <= bounds.1,
        "{label}: stall {stall} ms outside {bounds:?}: {d}"
    );
    assert!(
        start >= 1000.0,
        "{label}: stall at {start} ms, before the cut: {d}"
    );
    let bin = d["bin_ms"].as_f64().unwrap();
    let from = d["from_ms"].as_f64().unwrap();
    let after: u64 = d["completions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(i, _)| from + *i as f64 * bin > start + stall)
        .map(|(_, c)| c.as_u64().unwrap())
        .sum();
    assert!(after > 0, "{label}: no I/O after the stall: {d}");
    eprintln!(
        "{label:<30} path cut: stall {:.2} s (from {:.2} s into the window), worst latency \
         {:.2} s, {:.0} IOPS before, recovered {} (TCG)",
        stall / 1000.0,
        start / 1000.0,
        d["worst_latency_ms"].as_f64().unwrap_or(0.0) / 1000.0,
        d["pre_fault_iops"].as_f64().unwrap_or(0.0),
        d["recovered_ms"]
            .as_f64()
            .map_or("never".to_string(), |m| format!(
                "after {:.2} s",
                m / 1000.0
            )),
    );
}
