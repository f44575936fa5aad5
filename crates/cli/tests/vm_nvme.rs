//! NVMe/TCP against the Linux kernel's own implementation, in a QEMU TCG guest (testkit::vm):
//! the kernel's nvme-tcp host against sanbench's target, and sanbench's initiator against the
//! kernel's nvmet-tcp target, data compared both ways, digests on and off; `sanbench discover`
//! against the kernel's discovery controller.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sanbench_nvme::host::conn::HostOptions;
use sanbench_nvme::host::session::{connect_admin, connect_io, exec_ok};
use sanbench_nvme::target::{Target, TargetConfig};
use sanbench_nvme::wire::cmd::{io, rw_sqe, DataPtr, Rw};
use sanbench_testkit::{free_port, vm};

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

#[test]
fn kernel_host_against_sanbench_target() {
    let (k, vmlinuz) = vm::kernel();
    let port = free_port();
    let t = Target::bind(TargetConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        nqn: NQN.into(),
        size: 64 << 20,
        ..TargetConfig::default()
    })
    .unwrap();
    let stats = t.stats();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let server = std::thread::spawn(move || t.run(s2).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("initrd");
    let script = format!(
        r#"
connect() {{
  echo "transport=tcp,traddr=10.0.2.100,trsvcid=4420,nqn={NQN}$1" > /dev/nvme-fabrics || echo CONNECT-FAILED
  for i in $(seq 1 100); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
  [ -b /dev/nvme0n1 ] || echo NO-NAMESPACE
}}
connect ""
echo "TRANSPORT=$(cat /sys/class/nvme/nvme0/transport)"
echo "MODEL=$(cat /sys/class/nvme/nvme0/model)"
dd if=/dev/urandom of=/tmp/a bs=4096 count=256 2>/dev/null
dd if=/tmp/a of=/dev/nvme0n1 bs=4096 conv=fsync 2>/dev/null
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/nvme0n1 of=/tmp/b bs=4096 count=256 2>/dev/null
[ -b /dev/nvme0n1 ] && cmp /tmp/a /tmp/b && echo SANBENCH-CMP-OK
echo "MD5=$(md5sum /tmp/a | cut -d' ' -f1)"
echo 1 > /sys/class/nvme/nvme0/delete_controller
sleep 0.5
connect ",hdr_digest,data_digest"
dd if=/dev/nvme0n1 of=/tmp/c bs=4096 count=256 2>/dev/null
[ -b /dev/nvme0n1 ] && cmp /tmp/a /tmp/c && echo SANBENCH-DIGEST-CMP-OK
echo 1 > /sys/class/nvme/nvme0/delete_controller
"#
    );
    vm::build_initramfs(&initrd, &k, &["crc32c_generic", "nvme-tcp"], &[], &script);
    let mut g = vm::Vm::boot(&vmlinuz, &initrd, &[], &[(4420, port)]);
    let mut console = g.wait_for("SANBENCH-VM-DONE", Duration::from_secs(240));
    if let Some(e) = stats.last_error.lock().unwrap().as_ref() {
        console.push_str(&format!("\nsanbench target's last connection error: {e}"));
    }
    assert!(console.contains("TRANSPORT=tcp"), "{console}");
    assert!(console.contains("MODEL=SANBENCH"), "{console}");
    assert!(console.contains("SANBENCH-CMP-OK"), "{console}");
    assert!(console.contains("SANBENCH-DIGEST-CMP-OK"), "{console}");
    // What the guest wrote is in sanbench's store: read it back with sanbench's own host.
    let md5 = console
        .split("MD5=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    let o = HostOptions::default();
    let a = connect_admin(SocketAddr::from(([127, 0, 0, 1], port)), NQN, 1, 1, &o).unwrap();
    let mut q = connect_io(SocketAddr::from(([127, 0, 0, 1], port)), NQN, &a, 1, 8, &o).unwrap();
    let mut b = vec![0u8; 1 << 20];
    rw(&mut q, io::READ, 0, &[], &mut b);
    let f = dir.path().join("data");
    std::fs::write(&f, &b).unwrap();
    let out = std::process::Command::new("md5sum")
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&md5),
        "{console}"
    );
    drop(g);
    drop((q, a));
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
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
    drop(t);
    // `sanbench run --verify` against the kernel's target: every read's data checked.
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("sanbench"))
        .args(["run", &format!("nvme+tcp://127.0.0.1:{port}/{NQN}")])
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
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        g.console()
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["results"][0];
    assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{v}");
}
