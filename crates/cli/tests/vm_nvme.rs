//! sanbench against the Linux kernel's own implementations, in a QEMU TCG guest (testkit::vm):
//! the kernel's nvme-tcp host (three namespaces), nbd-client and open-iscsi against sanbench's
//! NVMe/TCP, NBD and iSCSI servers in one boot, and sanbench's initiator against the
//! kernel's nvmet-tcp target, data compared both ways, digests on and off; `sanbench discover`
//! against the kernel's discovery controller. The first guest also runs kernel TLS for NBD
//! over TLS in every pairing of kernel and user-space records (ktls_guest/: one boot for both).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sanbench_nvme::host::conn::HostOptions;
use sanbench_nvme::host::session::{connect_admin, connect_io, exec_ok};
use sanbench_nvme::target::{Target, TargetConfig};
use sanbench_nvme::wire::cmd::{io, rw_sqe, DataPtr, Rw};
use sanbench_testkit::{free_port, vm};

mod ktls_guest;
mod tls;

const NQN: &str = "nqn.2026-11.io.sanbench:vm";

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn rw(
    c: &mut sanbench_nvme::host::conn::Connection,
    op: u8,
    lba: u64,
    out: &[u8],
    inbuf: &mut [u8],
) {
    let len = out.len().max(inbuf.len());
    let r = Rw {
        nsid: 1,
        slba: lba,
        nlb: (len / 512) as u32,
        fua: false,
    };
    let s = rw_sqe(op, 1, r, DataPtr::Transport { len: len as u32 });
    exec_ok(c, "I/O", s, out, inbuf).unwrap();
}

/// The first 1 MiB of a file, as md5sum prints it.
fn md5_of_first_mib(path: &std::path::Path) -> String {
    let b = std::fs::read(path).unwrap();
    let f = path.with_extension("head");
    std::fs::write(&f, &b[..1 << 20]).unwrap();
    let out = std::process::Command::new("md5sum")
        .arg(&f)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The value after `key=` on the console.
fn console_value(console: &str, key: &str) -> String {
    console
        .split(&format!("{key}="))
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("")
        .to_string()
}

/// Starts a server thread running `run` until `stop`.
fn spawn<F: FnOnce(Arc<AtomicBool>) + Send + 'static>(
    stop: &Arc<AtomicBool>,
    run: F,
) -> std::thread::JoinHandle<()> {
    let s = stop.clone();
    std::thread::spawn(move || run(s))
}

/// One boot for the kernel's three initiators against sanbench's three servers: nvme-tcp
/// (three namespaces, digests off and on), nbd-client (Debian's nbd-client with the nbd
/// module) and open-iscsi (iscsid + iscsiadm with iscsi_tcp). Each writes random data, drops
/// the page cache, reads it back and compares; what the guest wrote is then checked in
/// sanbench's own stores on the host. Then, in the same boot, the kernel TLS pairings of
/// ktls_guest/ (sanbench on both sides, inside the guest).
#[test]
fn kernel_host_against_sanbench_target() {
    let (k, vmlinuz) = vm::kernel();
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let t = Target::bind(TargetConfig {
        listen: loopback,
        nqn: NQN.into(),
        size: 64 << 20,
        namespaces: 3,
        ..TargetConfig::default()
    })
    .unwrap();
    let port = t.local_addr().port();
    let stats = t.stats();
    let nvme = spawn(&stop, move |s| t.run(s).unwrap());
    let nbd_file = dir.path().join("nbd.img");
    let mut ncfg = sanbench_nbd::ServerConfig::ram(loopback, 64 << 20);
    ncfg.file = Some(nbd_file.clone());
    ncfg.export = "vm".into();
    let n = sanbench_nbd::Server::bind(ncfg).unwrap();
    let nbd_port = n.local_addr().port();
    let nbd = spawn(&stop, move |s| n.run(s).unwrap());
    let iscsi_file = dir.path().join("iscsi.img");
    let i = sanbench_iscsi::target::Target::bind(sanbench_iscsi::target::TargetConfig {
        listen: loopback,
        lun_size: 64 << 20,
        file: Some(iscsi_file.clone()),
        ..Default::default()
    })
    .unwrap();
    let iqn = sanbench_iscsi::target::TargetConfig::default().iqn;
    let iscsi_port = i.local_addr().port();
    let iscsi = spawn(&stop, move |s| i.run(s).unwrap());
    let initrd = dir.path().join("initrd");
    // sanbench goes in stripped, at its own path with the libraries its build links (ldd), as
    // the other tools do.
    let sb = vm::stripped_sanbench(env!("CARGO_BIN_EXE_sanbench"), dir.path())
        .display()
        .to_string();
    let script = format!(
        r#"
connect() {{
  echo "transport=tcp,traddr=10.0.2.100,trsvcid=4420,nqn={NQN}$1" > /dev/nvme-fabrics || echo CONNECT-FAILED
  for i in $(seq 1 100); do [ -b /dev/nvme0n3 ] && break; sleep 0.1; done
  [ -b /dev/nvme0n1 ] || echo NO-NAMESPACE
}}
connect ""
echo "TRANSPORT=$(cat /sys/class/nvme/nvme0/transport)"
echo "MODEL=$(cat /sys/class/nvme/nvme0/model)"
echo "NAMESPACES=$(ls /dev/ | grep -c '^nvme0n[0-9]*$')"
dd if=/dev/urandom of=/tmp/a bs=4096 count=256 2>/dev/null
dd if=/dev/urandom of=/tmp/n3 bs=4096 count=256 2>/dev/null
dd if=/tmp/a of=/dev/nvme0n1 bs=4096 conv=fsync 2>/dev/null
dd if=/tmp/n3 of=/dev/nvme0n3 bs=4096 conv=fsync 2>/dev/null
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/nvme0n1 of=/tmp/b bs=4096 count=256 2>/dev/null
dd if=/dev/nvme0n3 of=/tmp/b3 bs=4096 count=256 2>/dev/null
[ -b /dev/nvme0n1 ] && cmp /tmp/a /tmp/b && echo SANBENCH-CMP-OK
[ -b /dev/nvme0n3 ] && cmp /tmp/n3 /tmp/b3 && echo SANBENCH-NS3-CMP-OK
echo "MD5=$(md5sum /tmp/a | cut -d' ' -f1)"
# sanbench itself in the guest, reading the namespace: its manifest names the device's transport.
{sb} run /dev/nvme0n1 --read 100 --bs 4k --time 1s --ramp 0 --json /tmp/r.json --quiet \
  > /tmp/sb.out 2>&1 || {{ echo SB-RUN-FAILED; cat /tmp/sb.out; }}
echo "SB-DEVICE=$(tr -d ' \n' < /tmp/r.json | grep -o '{{[^{{}}]*"kind":"nvme"[^{{}}]*}}')"
echo 1 > /sys/class/nvme/nvme0/delete_controller
sleep 0.5
connect ",hdr_digest,data_digest"
dd if=/dev/nvme0n1 of=/tmp/c bs=4096 count=256 2>/dev/null
[ -b /dev/nvme0n1 ] && cmp /tmp/a /tmp/c && echo SANBENCH-DIGEST-CMP-OK
echo 1 > /sys/class/nvme/nvme0/delete_controller

# The kernel's NBD client.
/usr/sbin/nbd-client -N vm 10.0.2.100 10809 /dev/nbd0 || echo NBD-CLIENT-FAILED
echo "NBD-SIZE=$(cat /sys/block/nbd0/size)"
dd if=/dev/urandom of=/tmp/d bs=4096 count=256 2>/dev/null
dd if=/tmp/d of=/dev/nbd0 bs=4096 conv=fsync 2>/dev/null
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/nbd0 of=/tmp/e bs=4096 count=256 2>/dev/null
cmp /tmp/d /tmp/e && echo SANBENCH-NBD-CMP-OK
echo "NBDMD5=$(md5sum /tmp/d | cut -d' ' -f1)"
/usr/sbin/nbd-client -d /dev/nbd0

# open-iscsi: iscsid and iscsiadm, a node record made by hand (SendTargets would name the
# target's own address, 127.0.0.1, which is not the host from in here).
mkdir -p /etc/iscsi/nodes /etc/iscsi/send_targets /var/lib/iscsi /run/lock/iscsi /var/lock
echo "InitiatorName=iqn.2026-11.io.sanbench:guest" > /etc/iscsi/initiatorname.iscsi
touch /etc/iscsi/iscsid.conf
/usr/sbin/iscsid -f -n > /tmp/iscsid.log 2>&1 &
sleep 1
/usr/sbin/iscsiadm -m node -o new -T {iqn} -p 10.0.2.100:3260 > /dev/null || echo ISCSI-NODE-FAILED
/usr/sbin/iscsiadm -m node -T {iqn} -p 10.0.2.100:3260 --login || echo ISCSI-LOGIN-FAILED
for i in $(seq 1 100); do [ -b /dev/sda ] && break; sleep 0.1; done
[ -b /dev/sda ] || {{ echo NO-ISCSI-DISK; cat /tmp/iscsid.log; }}
dd if=/dev/urandom of=/tmp/f bs=4096 count=256 2>/dev/null
dd if=/tmp/f of=/dev/sda bs=4096 conv=fsync 2>/dev/null
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/sda of=/tmp/g bs=4096 count=256 2>/dev/null
[ -b /dev/sda ] && cmp /tmp/f /tmp/g && echo SANBENCH-ISCSI-CMP-OK
echo "ISCSIMD5=$(md5sum /tmp/f | cut -d' ' -f1)"
/usr/sbin/iscsiadm -m node -T {iqn} -p 10.0.2.100:3260 --logout > /dev/null
{ktls}"#,
        ktls = ktls_guest::script(&sb)
    );
    let ktls_files = ktls_guest::files();
    vm::build_initramfs_with(
        &initrd,
        &k,
        &[
            &["crc32c_generic", "nvme-tcp", "nbd", "iscsi_tcp", "sd_mod"][..],
            ktls_guest::MODULES,
        ]
        .concat(),
        &[("nbd", "nbds_max=1")],
        &script,
        &[
            "/usr/sbin/nbd-client",
            "/usr/sbin/iscsid",
            "/usr/sbin/iscsiadm",
            sb.as_str(),
        ],
        // passwd and group: iscsid looks up the user of every iscsiadm that talks to it; then
        // the kernel TLS pairings' certificates.
        &[
            &[
                ("etc/passwd", &b"root:x:0:0:root:/:/bin/sh\n"[..]),
                ("etc/group", &b"root:x:0:\n"[..]),
            ][..],
            &ktls_files
                .iter()
                .map(|(p, b)| (*p, b.as_slice()))
                .collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    let mut g = vm::Vm::boot(
        &vmlinuz,
        &initrd,
        &[],
        &[(4420, port), (10809, nbd_port), (3260, iscsi_port)],
    );
    // The kernel TLS pairings take about half the guest's time.
    let mut console = g.wait_for("SANBENCH-VM-DONE", Duration::from_secs(600));
    if let Some(e) = stats.last_error.lock().unwrap().as_ref() {
        console.push_str(&format!("\nsanbench target's last connection error: {e}"));
    }
    ktls_guest::check(&console);
    assert!(console.contains("TRANSPORT=tcp"), "{console}");
    assert!(console.contains("MODEL=SANBENCH"), "{console}");
    assert!(console.contains("NAMESPACES=3"), "{console}");
    assert!(console.contains("SANBENCH-CMP-OK"), "{console}");
    assert!(console.contains("SANBENCH-NS3-CMP-OK"), "{console}");
    assert!(console.contains("SANBENCH-DIGEST-CMP-OK"), "{console}");
    assert!(console.contains("NBD-SIZE=131072"), "{console}");
    assert!(console.contains("SANBENCH-NBD-CMP-OK"), "{console}");
    assert!(console.contains("SANBENCH-ISCSI-CMP-OK"), "{console}");
    // sanbench run inside the guest on /dev/nvme0n1 labels it NVMe over TCP, with the
    // controller's address and subsystem, in its manifest.
    let dev = console_value(&console, "SB-DEVICE");
    for want in [
        "\"kind\":\"nvme\"".to_string(),
        "\"transport\":\"tcp\"".to_string(),
        "traddr=10.0.2.100".to_string(),
        format!("\"subsysnqn\":\"{NQN}\""),
    ] {
        assert!(
            dev.contains(&want),
            "{want} not in the guest's manifest: {dev}\n{console}"
        );
    }
    // What the guest wrote is in sanbench's stores: the NBD and iSCSI files on the host, and
    // namespace 1 read back with sanbench's own NVMe/TCP host.
    assert_eq!(
        md5_of_first_mib(&nbd_file),
        console_value(&console, "NBDMD5")
    );
    assert_eq!(
        md5_of_first_mib(&iscsi_file),
        console_value(&console, "ISCSIMD5")
    );
    let o = HostOptions::default();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let a = connect_admin(addr, NQN, 1, 1, &o).unwrap();
    let mut q = connect_io(addr, NQN, &a, 1, 8, &o).unwrap();
    let mut b = vec![0u8; 1 << 20];
    rw(&mut q, io::READ, 0, &[], &mut b);
    let f = dir.path().join("nvme.img");
    std::fs::write(&f, &b).unwrap();
    assert_eq!(
        md5_of_first_mib(&f),
        console_value(&console, "MD5"),
        "{console}"
    );
    drop(g);
    drop((q, a));
    stop.store(true, Ordering::Relaxed);
    for t in [nvme, nbd, iscsi] {
        t.join().unwrap();
    }
    assert_eq!(
        stats.failed.load(Ordering::Relaxed),
        0,
        "{:?}",
        stats.last_error.lock().unwrap()
    );
}

#[test]
fn sanbench_initiator_against_kernel_nvmet() {
    let (k, vmlinuz) = vm::kernel();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("initrd");
    let script = format!(
        r#"
mount -t configfs none /sys/kernel/config
cd /sys/kernel/config/nvmet
mkdir subsystems/{NQN}
echo 1 > subsystems/{NQN}/attr_allow_any_host
mkdir subsystems/{NQN}/namespaces/1
echo -n /dev/ram0 > subsystems/{NQN}/namespaces/1/device_path
echo 1 > subsystems/{NQN}/namespaces/1/enable
mkdir ports/1
echo 0.0.0.0 > ports/1/addr_traddr
echo tcp > ports/1/addr_trtype
echo 4420 > ports/1/addr_trsvcid
echo ipv4 > ports/1/addr_adrfam
ln -s /sys/kernel/config/nvmet/subsystems/{NQN} ports/1/subsystems/{NQN}
echo SANBENCH-NVMET-READY
sleep 100000
"#
    );
    vm::build_initramfs(
        &initrd,
        &k,
        &["configfs", "crc32c_generic", "brd", "nvmet", "nvmet-tcp"],
        &[("brd", "rd_nr=1 rd_size=65536")],
        &script,
    );
    let mut g = vm::Vm::boot(&vmlinuz, &initrd, &[(port, 4420)], &[]);
    g.wait_for("SANBENCH-NVMET-READY", Duration::from_secs(240));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // `sanbench discover` against the kernel's discovery controller (nvmet answers the
    // discovery NQN on every port it listens on).
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("sanbench"))
        .args([
            "discover",
            "--json",
            &format!("nvme+tcp://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        g.console()
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nvm: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["subtype"] == "nvm subsystem")
        .collect();
    assert_eq!(nvm.len(), 1, "{v}");
    assert_eq!(nvm[0]["subnqn"], NQN, "{v}");
    assert_eq!(nvm[0]["trtype"], "tcp", "{v}");
    assert_eq!(nvm[0]["adrfam"], "ipv4", "{v}");
    assert_eq!(nvm[0]["trsvcid"], "4420", "{v}");
    for (i, (hd, dd)) in [(false, false), (true, true)].into_iter().enumerate() {
        let o = HostOptions {
            header_digest: hd,
            data_digest: dd,
            timeout: Duration::from_secs(60),
            ..HostOptions::default()
        };
        let a =
            connect_admin(addr, NQN, 1, 2, &o).unwrap_or_else(|e| panic!("{e}\n{}", g.console()));
        assert_eq!(
            a.ns.as_ref().unwrap().nsze * a.ns.as_ref().unwrap().block_size(),
            64 << 20
        );
        let mut q = connect_io(addr, NQN, &a, 1, 16, &o).unwrap();
        // nvmet takes the Connect that disables SQ flow control: its reads end with a
        // C2HData flagged SUCCESS, which this host completes on.
        assert!(q.sqflow_disabled);
        // One write small enough for the capsule (when the port allows in-capsule data) and one
        // that needs R2Ts; both read back.
        for (lba, len) in [(8u64, 4096usize), (1024, 256 * 1024)] {
            let data = pattern(len, (i * 10) as u32 + lba as u32);
            rw(&mut q, io::WRITE, lba, &data, &mut []);
            let mut back = vec![0u8; len];
            rw(&mut q, io::READ, lba, &[], &mut back);
            assert!(
                back == data,
                "data differs at LBA {lba} (digests {hd}/{dd})"
            );
        }
    }
    // The engine as `run` opens it, with what it negotiated in the parameters.
    let t = sanbench_nvme::initiator::open(&format!(
        "nvme+tcp://127.0.0.1:{port}/{NQN}?digest=header,data"
    ))
    .unwrap();
    let info = t.info();
    assert_eq!(info.size, 64 << 20);
    assert_eq!(info.params["header_digest"], true);
    assert_eq!(info.params["model"], "Linux", "{:?}", info.params);
    // nvmet reports ANA (CMIC bit 3): its log page read, group 1 optimized on its one port,
    // and its ANA change notices enabled.
    assert_eq!(info.params["ana_state"], "optimized", "{:?}", info.params);
    assert_eq!(info.params["ana_group"], 1, "{:?}", info.params);
    assert_eq!(info.params["ana_notices"], true, "{:?}", info.params);
    assert_eq!(
        t.access_state(),
        Some(sanbench_engine::AccessState::Optimized)
    );
    drop(t);
    // `sanbench run --verify` against the kernel's target: every read's data checked, on
    // each socket layer asked for explicitly (the io_uring one where this kernel has it).
    let mut layers = vec!["poll"];
    if sanbench_io::SockRing::probe().is_ok() {
        layers.push("uring");
    }
    for layer in layers {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("sanbench"))
            .args([
                "run",
                &format!("nvme+tcp://127.0.0.1:{port}/{NQN}?sockio={layer}"),
            ])
            .args([
                "--bs", "16k", "--read", "50", "--qd", "4", "--time", "2s", "--ramp", "0",
            ])
            .args([
                "--precondition",
                "fill",
                "--verify",
                "--quiet",
                "--no-monitor",
                "--json",
                "-",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{layer}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            g.console()
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &v["results"][0];
        assert_eq!(r["info"]["params"]["socket"], layer, "{v}");
        assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{v}");
    }
}
