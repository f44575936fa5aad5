//! Multipath devices labelled with their paths, on the fixture tree `fixtures/guest-mp` (see
//! `fixtures/make_guest_mp.py`): the sysfs of crates/cli/tests/kernel_multipath.rs's guest
//! after its path cuts, with `fixtures/bin/dmsetup` printing what dmsetup printed there.

use sanbench_monitor::transport::{inspect_device, InspectOptions, MultipathPath, Transport};
use sanbench_monitor::DeviceInfo;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/guest-mp")
}

fn opts() -> InspectOptions {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin");
    let tool = |t: &str| bin.join(t).display().to_string();
    InspectOptions {
        ethtool: vec![tool("ethtool"), "-k".into()],
        ip_route_get: vec![tool("ip"), "route".into(), "get".into()],
        dmsetup: vec![tool("dmsetup")],
        ..Default::default()
    }
}

fn inspect(dev: &str, o: &InspectOptions) -> DeviceInfo {
    inspect_device(&root(), Path::new(dev), o).unwrap()
}

/// A path's iSCSI portal and session state.
fn portal(p: &MultipathPath) -> (Option<&str>, Option<&str>) {
    match &p.transport {
        Transport::Iscsi { portal, state, .. } => (portal.as_deref(), state.as_deref()),
        other => panic!("not iSCSI: {other:?}"),
    }
}

#[test]
fn dm_multipath_over_two_iscsi_sessions() {
    let d = inspect("/dev/dm-0", &opts());
    assert_eq!(d.label, "dm-multipath (2 paths, iSCSI)");
    assert_eq!(d.size_bytes, Some(32 << 20));
    let Transport::DmMultipath {
        device,
        dm_name,
        uuid,
        selector,
        features,
        hw_handler,
        paths,
    } = &d.transport
    else {
        panic!("{:?}", d.transport)
    };
    assert_eq!(device, "dm-0");
    assert_eq!(dm_name.as_deref(), Some("mpatha"));
    assert_eq!(uuid.as_deref(), Some("mpath-sanbench-iscsi"));
    assert_eq!(selector.as_deref(), Some("round-robin"));
    assert_eq!(features, &["queue_if_no_path"]);
    assert_eq!(hw_handler, &None);
    let names: Vec<(&str, Option<&str>)> = paths
        .iter()
        .map(|p| (p.device.as_str(), p.dev.as_deref()))
        .collect();
    assert_eq!(names, [("sda", Some("8:0")), ("sdb", Some("8:16"))]);
    // Each path labelled as a device of its own: the session's portal and state; dm's view of
    // the path (the second was cut: its session is FREE and dm failed it once).
    assert!(paths.iter().all(|p| p.label == "iSCSI"));
    assert_eq!(
        portal(&paths[0]),
        (Some("10.0.2.100:3260"), Some("LOGGED_IN"))
    );
    assert_eq!(portal(&paths[1]), (Some("10.0.2.100:3261"), Some("FREE")));
    assert_eq!(
        paths
            .iter()
            .map(|p| (p.state.as_deref(), p.fail_count))
            .collect::<Vec<_>>(),
        [(Some("active"), Some(0)), (Some("failed"), Some(1))]
    );
    assert!(paths.iter().all(|p| p.ana_state.is_none()));
    for p in paths {
        let net = p.net.as_ref().unwrap();
        assert_eq!((net.name.as_str(), net.mtu), ("eth0", Some(1500)));
    }
    // The device's own interface is its first path's.
    assert_eq!(d.net.unwrap().name, "eth0");
}

#[test]
fn dm_multipath_in_the_manifest_round_trips() {
    let d = inspect("/dev/dm-0", &opts());
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["transport"]["kind"], "dm_multipath");
    assert_eq!(j["transport"]["paths"][1]["transport"]["kind"], "iscsi");
    assert_eq!(j["transport"]["paths"][1]["state"], "failed");
    let back: DeviceInfo = serde_json::from_value(j).unwrap();
    assert_eq!(back, d);
}

#[test]
fn paths_come_in_table_order() {
    // mpathb lists 8:16 (sdb) first; it has no mpath- uuid: its table says multipath.
    let d = inspect("/dev/dm-2", &opts());
    let Transport::DmMultipath {
        selector, paths, ..
    } = &d.transport
    else {
        panic!("{:?}", d.transport)
    };
    assert_eq!(selector.as_deref(), Some("service-time"));
    let names: Vec<&str> = paths.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(names, ["sdb", "sda"]);
}

#[test]
fn other_maps_and_no_dmsetup() {
    // A linear map is no multipath device.
    assert!(matches!(
        inspect("/dev/dm-1", &opts()).transport,
        Transport::Unknown { .. }
    ));
    // Without dmsetup: the mpath- uuid still tells, the paths come by name, and what only
    // dmsetup knows is absent; a map without that uuid cannot be told apart.
    let o = InspectOptions {
        dmsetup: vec!["/nonexistent/dmsetup".into()],
        ..opts()
    };
    let d = inspect("/dev/dm-0", &o);
    assert_eq!(d.label, "dm-multipath (2 paths, iSCSI)");
    let Transport::DmMultipath {
        selector,
        features,
        paths,
        ..
    } = &d.transport
    else {
        panic!("{:?}", d.transport)
    };
    assert_eq!((selector, features.len()), (&None, 0));
    let names: Vec<&str> = paths.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(names, ["sda", "sdb"]);
    assert!(paths
        .iter()
        .all(|p| p.state.is_none() && p.fail_count.is_none()));
    assert!(matches!(
        inspect("/dev/dm-2", &o).transport,
        Transport::Unknown { .. }
    ));
}

#[test]
fn a_path_is_labelled_as_itself() {
    // The slave on its own is the plain iSCSI disk it always was.
    let d = inspect("/dev/sdb", &opts());
    assert_eq!(d.label, "iSCSI");
}

/// A path's controller, its port and state.
fn controller(p: &MultipathPath) -> (&str, &str, Option<&str>) {
    match &p.transport {
        Transport::Nvme {
            controller,
            address,
            state,
            ..
        } => (
            controller.as_str(),
            address
                .as_deref()
                .and_then(|a| a.split(',').find_map(|kv| kv.strip_prefix("trsvcid=")))
                .unwrap_or(""),
            state.as_deref(),
        ),
        other => panic!("not NVMe: {other:?}"),
    }
}

#[test]
fn nvme_native_multipath_head_lists_each_controllers_path() {
    let d = inspect("/dev/nvme0n1", &opts());
    assert_eq!(d.label, "NVMe/TCP multipath (2 paths)");
    let Transport::Nvme {
        controller: first,
        state,
        subsystem,
        iopolicy,
        paths,
        ..
    } = &d.transport
    else {
        panic!("{:?}", d.transport)
    };
    // The first controller's fields, as before paths were listed.
    assert_eq!((first.as_str(), state.as_deref()), ("nvme0", Some("live")));
    assert_eq!(subsystem.as_deref(), Some("nvme-subsys0"));
    assert_eq!(iopolicy.as_deref(), Some("round-robin"));
    let seen: Vec<_> = paths
        .iter()
        .map(|p| (p.device.as_str(), controller(p), p.ana_state.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (
                "nvme0c0n1",
                ("nvme0", "4420", Some("live")),
                Some("optimized")
            ),
            (
                "nvme0c1n1",
                ("nvme1", "4421", Some("connecting")),
                Some("optimized")
            ),
        ]
    );
    assert!(paths.iter().all(|p| p.label == "NVMe/TCP"
        && p.dev.is_none()
        && p.state.is_none()
        && p.net.as_ref().is_some_and(|n| n.name == "eth0")));
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["transport"]["kind"], "nvme");
    assert_eq!(j["transport"]["paths"][1]["ana_state"], "optimized");
    assert!(j["transport"]["paths"][1].get("dev").is_none());
}
