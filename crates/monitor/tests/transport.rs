//! Transport detection on the fixture tree `fixtures/host` (see `fixtures/make_host.py`), one
//! block device per kind, plus the environment manifest read from the same root.

use sanbench_monitor::manifest::collect;
use sanbench_monitor::transport::{inspect_device, InspectOptions, Transport};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host")
}

fn opts() -> InspectOptions {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin");
    InspectOptions {
        ethtool: vec![bin.join("ethtool").display().to_string(), "-k".into()],
        ip_route_get: vec![
            bin.join("ip").display().to_string(),
            "route".into(),
            "get".into(),
        ],
        ..Default::default()
    }
}

fn t(dev: &str) -> Transport {
    inspect_device(&root(), Path::new(dev), &opts())
        .unwrap()
        .transport
}

#[test]
fn iscsi_with_portal_interface_mtu_and_offloads() {
    let d = inspect_device(&root(), Path::new("/dev/sdb"), &opts()).unwrap();
    assert_eq!(
        d.transport,
        Transport::Iscsi {
            session: "session1".into(),
            target_name: Some("iqn.2026-11.org.sanbench:ram0".into()),
            tpgt: Some("1".into()),
            portal: Some("10.0.0.2:3260".into()),
        }
    );
    assert_eq!(d.size_bytes, Some(2_097_152 * 512));
    assert_eq!(d.logical_block_size, Some(512));
    assert_eq!(d.rotational, Some(false));
    let net = d.net.unwrap();
    assert_eq!(net.name, "veth-i0");
    assert_eq!(net.mtu, Some(9000));
    assert_eq!(net.offloads.get("tcp-segmentation-offload"), Some(&true));
    assert_eq!(net.offloads.get("large-receive-offload"), Some(&false));
    assert!(net.note.is_none());
}

#[test]
fn partition_resolves_to_its_disk() {
    let d = inspect_device(&root(), Path::new("/dev/sdb1"), &opts()).unwrap();
    assert_eq!(d.name, "sdb");
    assert!(matches!(d.transport, Transport::Iscsi { .. }));
}

#[test]
fn fibre_channel() {
    assert_eq!(
        t("/dev/sdc"),
        Transport::FibreChannel {
            rport: "rport-5:0-2".into(),
            port_name: Some("0x500507680b21a0c1".into()),
            node_name: Some("0x500507680b00a0c1".into()),
            port_id: Some("0x010200".into()),
        }
    );
}

#[test]
fn sas() {
    assert_eq!(
        t("/dev/sda"),
        Transport::Sas {
            end_device: "end_device-0:0".into(),
            sas_address: Some("0x5000c500a1b2c3d4".into()),
        }
    );
}

#[test]
fn sata() {
    assert_eq!(
        t("/dev/sdd"),
        Transport::Sata {
            port: "ata2".into()
        }
    );
}

#[test]
fn nvme_pcie() {
    let d = inspect_device(&root(), Path::new("/dev/nvme0n1"), &opts()).unwrap();
    assert_eq!(
        d.transport,
        Transport::Nvme {
            controller: "nvme0".into(),
            transport: Some("pcie".into()),
            address: Some("0000:00:04.0".into()),
            subsysnqn: Some("nqn.2014.08.org.nvmexpress:1b361b36serial".into()),
        }
    );
    assert_eq!(d.logical_block_size, Some(4096));
    assert!(d.net.is_none(), "PCIe has no network interface");
}

#[test]
fn nvme_tcp_multipath_finds_controller_and_interface() {
    let d = inspect_device(&root(), Path::new("/dev/nvme1n1"), &opts()).unwrap();
    match &d.transport {
        Transport::Nvme {
            controller,
            transport,
            address,
            ..
        } => {
            assert_eq!(controller, "nvme1");
            assert_eq!(transport.as_deref(), Some("tcp"));
            assert!(address.as_deref().unwrap().contains("traddr=10.0.1.2"));
        }
        other => panic!("{other:?}"),
    }
    let net = d.net.unwrap();
    assert_eq!(net.name, "eth1");
    assert_eq!(net.mtu, Some(1500));
}

#[test]
fn virtio_loop_nbd_unknown() {
    assert_eq!(
        t("/dev/vda"),
        Transport::Virtio {
            device: "virtio2".into()
        }
    );
    assert_eq!(
        t("/dev/loop0"),
        Transport::Loop {
            backing_file: Some("/var/tmp/sanbench.img".into())
        }
    );
    assert_eq!(t("/dev/nbd0"), Transport::Nbd { pid: Some(4321) });
    assert_eq!(
        t("/dev/ram0"),
        Transport::Unknown {
            sysfs_path: "/sys/devices/virtual/block/ram0".into()
        }
    );
}

#[test]
fn missing_device_and_missing_tools_are_clear() {
    let e = inspect_device(&root(), Path::new("/dev/sdz"), &opts()).unwrap_err();
    assert!(e.is_usage());
    assert!(e.to_string().contains("sdz"), "{e}");
    // No ethtool/ip: the transport is still reported, the interface carries a note.
    let o = InspectOptions {
        ethtool: vec!["/nonexistent/ethtool".into()],
        ip_route_get: vec!["/nonexistent/ip".into()],
        ..Default::default()
    };
    let d = inspect_device(&root(), Path::new("/dev/sdb"), &o).unwrap();
    assert!(matches!(d.transport, Transport::Iscsi { .. }));
    let net = d.net.unwrap();
    assert!(net.note.unwrap().contains("/nonexistent/ip"));
    // Interface given explicitly, ethtool missing: MTU read, offloads empty with a note.
    let o = InspectOptions {
        iface: Some("veth-i0".into()),
        ..o
    };
    let net = inspect_device(&root(), Path::new("/dev/sdb"), &o)
        .unwrap()
        .net
        .unwrap();
    assert_eq!(net.mtu, Some(9000));
    assert!(net.offloads.is_empty());
    assert!(net.note.unwrap().contains("ethtool"));
}

#[test]
fn manifest_from_fixture() {
    let m = collect(&root(), "0.1.0", Some(Path::new("/dev/nvme1n1")), &opts());
    assert_eq!(m.kernel.as_deref(), Some("6.1.0-28-amd64"));
    assert_eq!(m.hostname.as_deref(), Some("lab-initiator"));
    assert_eq!(m.cpu_count, 2);
    assert_eq!(
        m.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz")
    );
    assert_eq!(m.governor.as_deref(), Some("performance"));
    assert_eq!(m.mem_total_bytes, Some(8_039_416 * 1024));
    let j = serde_json::to_value(&m).unwrap();
    assert_eq!(j["device"]["transport"]["kind"], "nvme");
    assert_eq!(j["device"]["net"]["mtu"], 1500);
    // A device that is not there: the manifest still comes back, with a note.
    let m = collect(&root(), "0.1.0", Some(Path::new("/dev/sdz")), &opts());
    assert!(m.device.is_none());
    assert_eq!(m.notes.len(), 1);
    // A root without cpufreq: governor is null, not a guess.
    let empty = tempfile::tempdir().unwrap();
    let m = collect(empty.path(), "0.1.0", None, &opts());
    assert_eq!(m.governor, None);
    assert_eq!(
        serde_json::to_value(&m).unwrap()["governor"],
        serde_json::Value::Null
    );
}
