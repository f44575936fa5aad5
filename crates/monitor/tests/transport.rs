//! Transport detection on the fixture tree `fixtures/host` (see `fixtures/make_host.py`), one
//! block device per kind, plus the environment manifest read from the same root.

use sanbench_monitor::manifest::collect;
use sanbench_monitor::transport::{inspect_device, FcHost, InspectOptions, Transport};
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
        dmsetup: vec![bin.join("dmsetup").display().to_string()],
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
            state: None,
            transport_name: Some("tcp".into()),
        }
    );
    assert_eq!(d.label, "iSCSI");
    assert_eq!(d.size_bytes, Some(2_097_152 * 512));
    assert_eq!(d.logical_block_size, Some(512));
    assert_eq!(d.rotational, Some(false));
    let net = d.net.unwrap();
    assert_eq!(net.name, "veth-i0");
    assert_eq!(net.mtu, Some(9000));
    assert_eq!(net.offloads.get("tcp-segmentation-offload"), Some(&true));
    assert_eq!(net.offloads.get("large-receive-offload"), Some(&false));
    assert_eq!(net.offloads.get("tx-tcp-segmentation"), Some(&true));
    // What a storage stream does not pass through is not recorded.
    assert!(!net.offloads.contains_key("rx-vlan-offload"), "{net:?}");
    assert!(!net.offloads.contains_key("hsr-tag-ins-offload"), "{net:?}");
    assert!(!net.offloads.contains_key("tx-checksum-ipv4"), "{net:?}");
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
            port_state: Some("Online".into()),
            roles: Some("FCP Target".into()),
            host: Some(Box::new(FcHost {
                host: "host5".into(),
                port_name: Some("0x21000024ff7d6a10".into()),
                node_name: Some("0x20000024ff7d6a10".into()),
                port_id: Some("0x010100".into()),
                port_state: Some("Online".into()),
                port_type: Some("NPort (fabric via point-to-point)".into()),
                speed: Some("16 Gbit".into()),
                fabric_name: Some("0x100000051e0c1a2b".into()),
                symbolic_name: Some("QLE2692 FW:v8.08.231 DVR:v10.02.07.900-k".into()),
                maxframe_size: Some("2048 bytes".into()),
            })),
            fcoe_netdev: None,
        }
    );
    let d = inspect_device(&root(), Path::new("/dev/sdc"), &opts()).unwrap();
    assert_eq!(d.label, "FC");
    assert!(d.net.is_none(), "native FC has no network interface");
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
            state: None,
            subsystem: None,
            iopolicy: None,
            paths: vec![],
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

/// The sysfs of the software SAN in the test guest (fixtures/guest, see make_guest.py): what
/// the kernel's own stacks put there, labelled as the guest's run manifest labels them.
fn guest(dev: &str) -> sanbench_monitor::DeviceInfo {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/guest");
    inspect_device(&root, Path::new(dev), &opts()).unwrap()
}

#[test]
fn guest_fcoe_vn2vn_with_local_and_remote_port() {
    let d = guest("/dev/sda");
    assert_eq!(d.label, "FCoE");
    let Transport::FibreChannel {
        rport,
        port_name,
        port_state,
        roles,
        host,
        fcoe_netdev,
        ..
    } = &d.transport
    else {
        panic!("{:?}", d.transport)
    };
    assert_eq!(rport, "rport-0:0-0");
    assert_eq!(port_name.as_deref(), Some("0x2000aecabe2ca365"));
    assert_eq!(port_state.as_deref(), Some("Online"));
    assert_eq!(roles.as_deref(), Some("FCP Target, FCP Initiator"));
    assert_eq!(fcoe_netdev.as_deref(), Some("veth0"));
    let h = host.as_ref().unwrap();
    assert_eq!(h.host, "host0");
    assert_eq!(h.port_name.as_deref(), Some("0x2000cee246b92612"));
    assert_eq!(h.port_state.as_deref(), Some("Online"));
    assert_eq!(h.speed.as_deref(), Some("10 Gbit"));
    assert_eq!(
        h.port_type.as_deref(),
        Some("NPort (fabric via point-to-point)")
    );
    assert_eq!(h.symbolic_name.as_deref(), Some("fcoe v0.1 over veth0"));
    // The FCoE port's Ethernet interface is the device's interface.
    let net = d.net.unwrap();
    assert_eq!(net.name, "veth0");
    assert_eq!(net.mtu, Some(9000));
    assert_eq!(d.size_bytes, Some(32 << 20));
}

#[test]
fn guest_iscsi_and_iser_told_apart_by_the_scsi_host() {
    let d = guest("/dev/sdb");
    assert_eq!(d.label, "iSCSI");
    assert_eq!(
        d.transport,
        Transport::Iscsi {
            session: "session1".into(),
            target_name: Some("iqn.2026-11.io.sanbench:tcp".into()),
            tpgt: Some("1".into()),
            portal: Some("127.0.0.1:3260".into()),
            state: Some("LOGGED_IN".into()),
            transport_name: Some("tcp".into()),
        }
    );
    assert_eq!(d.net.unwrap().name, "lo");
    let d = guest("/dev/sdc");
    assert_eq!(d.label, "iSER");
    assert_eq!(
        d.transport,
        Transport::Iscsi {
            session: "session2".into(),
            target_name: Some("iqn.2026-11.io.sanbench:iser".into()),
            tpgt: Some("1".into()),
            portal: Some("10.0.2.15:3260".into()),
            state: Some("LOGGED_IN".into()),
            transport_name: Some("iser".into()),
        }
    );
}

#[test]
fn guest_nvme_tcp_and_rdma() {
    let d = guest("/dev/nvme0n1");
    assert_eq!(d.label, "NVMe/TCP");
    assert_eq!(
        d.transport,
        Transport::Nvme {
            controller: "nvme0".into(),
            transport: Some("tcp".into()),
            address: Some("traddr=10.0.2.15,trsvcid=4420,src_addr=10.0.2.15".into()),
            subsysnqn: Some("nqn.2026-11.io.sanbench:tcp".into()),
            state: Some("live".into()),
            subsystem: Some("nvme-subsys0".into()),
            iopolicy: None,
            paths: vec![],
        }
    );
    let d = guest("/dev/nvme1n1");
    assert_eq!(d.label, "NVMe/RDMA");
    assert_eq!(
        d.transport,
        Transport::Nvme {
            controller: "nvme1".into(),
            transport: Some("rdma".into()),
            address: Some("traddr=10.0.2.15,trsvcid=4421".into()),
            subsysnqn: Some("nqn.2026-11.io.sanbench:rdma".into()),
            state: Some("live".into()),
            subsystem: Some("nvme-subsys1".into()),
            iopolicy: None,
            paths: vec![],
        }
    );
    assert_eq!(d.net.unwrap().name, "lo");
}
