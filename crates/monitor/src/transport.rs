//! A block device's transport, read from sysfs the way `lsscsi --transport` does.
//!
//! The device's canonical sysfs path (`/sys/class/block/NAME` resolved) names its ancestors:
//! * iSCSI: `.../hostH/sessionS/targetH:C:T/H:C:T:L/block/sdX` → `iscsi_session/sessionS`
//!   (targetname, tpgt, state) and `iscsi_connection/connectionS:N` (persistent_address/port);
//!   the SCSI host's `proc_name` names the initiator's transport (`iscsi_tcp`, `iscsi_iser`
//!   for iSER over RDMA, or an offload driver such as `bnx2i`), as iscsiadm's
//!   `iface.transport_name` does;
//! * Fibre Channel: `.../hostH/rport-H:B-R/targetH:C:T/...` → `fc_remote_ports/rport-*`
//!   (port_name, node_name, port_id, port_state, roles) and the local port
//!   `fc_host/hostH` (port_name, port_state, port_type, speed, …); software FCoE hangs the
//!   host under its Ethernet interface (`.../net/IF/ctlr_N/hostH`), which is then the
//!   device's network interface;
//! * SAS: `.../hostH/port-H:P/end_device-H:P/targetH:C:T/...` → `sas_device/end_device-*`
//!   (sas_address);
//! * NVMe: `.../nvme/nvmeN/nvmeNnM` or `.../nvme-subsystem/nvme-subsysN/nvmeNnM` (native
//!   multipath) → `/sys/class/nvme/nvmeN/{transport,address,subsysnqn}`; a native multipath
//!   head lists every controller's path with its ANA state ([`multipath`]);
//! * dm-multipath: `dm-N` whose uuid starts `mpath-` or whose table is `multipath` → each
//!   device under `slaves/` labelled on its own ([`multipath`]);
//! * SATA (`ataN`), USB (`usbN`), virtio (`device/driver` is `virtio_blk`), loop
//!   (`loop/backing_file`), NBD (`pid`).
//!
//! For networked transports the interface toward the target is found with `ip route get ADDR`
//! (or given), and its MTU and `ethtool -k` offloads are recorded (docs/MEASURE.md, "Network").

use crate::error::{MonitorError, Result};
use crate::fsutil::{read_attr, under};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod dmsetup;
pub mod multipath;
mod net;

pub use multipath::MultipathPath;
pub use net::{net_iface, parse_ethtool_k, parse_route_dev, NetIface};
pub use sanbench_doc::manifest::{DeviceInfo, FcHost, Transport};

/// Commands and overrides for device and network inspection.
#[derive(Clone, Debug)]
pub struct InspectOptions {
    /// argv prefix; the interface name is appended. Default `ethtool -k`.
    pub ethtool: Vec<String>,
    /// argv prefix; the address is appended. Default `ip route get`.
    pub ip_route_get: Vec<String>,
    /// The interface toward the target, when known (skips the route lookup).
    pub iface: Option<String>,
    /// argv prefix; `table NAME` or `status NAME` is appended. Default `dmsetup`.
    pub dmsetup: Vec<String>,
    pub timeout: Duration,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions {
            ethtool: vec!["ethtool".into(), "-k".into()],
            ip_route_get: vec!["ip".into(), "route".into(), "get".into()],
            iface: None,
            dmsetup: vec!["dmsetup".into()],
            timeout: Duration::from_secs(3),
        }
    }
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("")
        .to_string()
}

fn digits_after(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
}

/// Reads what sysfs says about the block device `dev` (e.g. `/dev/sdb`, `/dev/disk/by-id/…`).
pub fn inspect_device(root: &Path, dev: &Path, opts: &InspectOptions) -> Result<DeviceInfo> {
    // Follow /dev/disk/by-* links on the real host; under a fixture root take the name as is.
    let real = std::fs::canonicalize(under(root, &dev.to_string_lossy()))
        .unwrap_or_else(|_| dev.to_path_buf());
    let given = name_of(&real);
    let class = under(root, "/sys/class/block").join(&given);
    let mut disk = std::fs::canonicalize(&class).map_err(|e| {
        MonitorError::Invalid(format!(
            "{}: no block device {given:?} in {} ({e})",
            dev.display(),
            class
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ))
    })?;
    if disk.join("partition").exists() {
        if let Some(p) = disk.parent() {
            disk = p.to_path_buf();
        }
    }
    let name = name_of(&disk);
    let transport = classify(root, &disk, &name, opts, 0);
    let net = match &transport {
        // The first path's interface (each path has its own in `paths`).
        Transport::DmMultipath { paths, .. } => paths.iter().find_map(|p| p.net.clone()),
        // FCoE: the interface the FC port sits on, no route to look up.
        Transport::FibreChannel {
            fcoe_netdev: Some(i),
            ..
        } => Some(net_iface(
            root,
            "",
            &InspectOptions {
                iface: Some(i.clone()),
                ..opts.clone()
            },
        )),
        t => t.remote_addr().map(|addr| net_iface(root, &addr, opts)),
    };
    let size_bytes = read_attr(&disk.join("size"))
        .and_then(|s| s.parse::<u64>().ok())
        .map(|sectors| sectors * 512);
    Ok(DeviceInfo {
        path: dev.display().to_string(),
        name,
        label: transport.label(),
        transport,
        size_bytes,
        logical_block_size: read_attr(&disk.join("queue/logical_block_size"))
            .and_then(|s| s.parse().ok()),
        rotational: read_attr(&disk.join("queue/rotational")).map(|s| s == "1"),
        net,
    })
}

fn classify(root: &Path, disk: &Path, name: &str, opts: &InspectOptions, depth: u32) -> Transport {
    let class = |c: &str, n: &str| under(root, "/sys/class").join(c).join(n);
    if let Some(t) = multipath::dm_multipath(root, disk, name, opts, depth) {
        return t;
    }
    if name.starts_with("loop") && disk.join("loop").is_dir() {
        return Transport::Loop {
            backing_file: read_attr(&disk.join("loop/backing_file")),
        };
    }
    if digits_after(name, "nbd") {
        return Transport::Nbd {
            pid: read_attr(&disk.join("pid")).and_then(|s| s.parse().ok()),
        };
    }
    if let Ok(drv) = std::fs::canonicalize(disk.join("device/driver")) {
        if name_of(&drv) == "virtio_blk" {
            let dev = std::fs::canonicalize(disk.join("device")).unwrap_or_default();
            return Transport::Virtio {
                device: name_of(&dev),
            };
        }
    }
    let sys = under(root, "/sys");
    for anc in disk.ancestors().skip(1) {
        if anc == sys || !anc.starts_with(&sys) {
            break;
        }
        let c = name_of(anc);
        if let Some(s) = c
            .strip_prefix("session")
            .filter(|_| digits_after(&c, "session"))
        {
            let sess = class("iscsi_session", &c);
            let transport_name = scsi_host_of(anc)
                .and_then(|h| read_attr(&class("scsi_host", &h).join("proc_name")))
                .map(|p| p.strip_prefix("iscsi_").unwrap_or(&p).to_string());
            return Transport::Iscsi {
                target_name: read_attr(&sess.join("targetname")),
                tpgt: read_attr(&sess.join("tpgt")),
                portal: iscsi_portal(root, s),
                state: read_attr(&sess.join("state")),
                transport_name,
                session: c,
            };
        }
        if c.starts_with("rport-") {
            let r = class("fc_remote_ports", &c);
            let host = scsi_host_of(anc).map(|h| Box::new(fc_host(&class("fc_host", &h), h)));
            return Transport::FibreChannel {
                port_name: read_attr(&r.join("port_name")),
                node_name: read_attr(&r.join("node_name")),
                port_id: read_attr(&r.join("port_id")),
                port_state: read_attr(&r.join("port_state")),
                roles: read_attr(&r.join("roles")),
                host,
                fcoe_netdev: fcoe_netdev(anc),
                rport: c,
            };
        }
        if c.starts_with("end_device-") {
            return Transport::Sas {
                sas_address: read_attr(&class("sas_device", &c).join("sas_address")),
                end_device: c,
            };
        }
        if digits_after(&c, "nvme-subsys") {
            // Native multipath: the namespace hangs off the subsystem; its controllers are the
            // `nvmeN` entries of the subsystem directory.
            if let Some(t) = multipath::nvme_head(root, anc, name, opts) {
                return t;
            }
        }
        if digits_after(&c, "nvme") && class("nvme", &c).exists() {
            return nvme(root, &c);
        }
        if digits_after(&c, "ata") {
            return Transport::Sata { port: c };
        }
        if digits_after(&c, "usb") {
            return Transport::Usb { bus: c };
        }
    }
    Transport::Unknown {
        sysfs_path: disk
            .strip_prefix(root)
            .map(|p| format!("/{}", p.display()))
            .unwrap_or_else(|_| disk.display().to_string()),
    }
}

fn nvme(root: &Path, ctl: &str) -> Transport {
    let d = under(root, "/sys/class/nvme").join(ctl);
    Transport::Nvme {
        controller: ctl.to_string(),
        transport: read_attr(&d.join("transport")),
        address: read_attr(&d.join("address")),
        subsysnqn: read_attr(&d.join("subsysnqn")),
        state: read_attr(&d.join("state")),
        subsystem: None,
        iopolicy: None,
        paths: Vec::new(),
    }
}

/// The SCSI host (`hostH`) directly above a session or remote port directory.
fn scsi_host_of(dir: &Path) -> Option<String> {
    let h = name_of(dir.parent()?);
    digits_after(&h, "host").then_some(h)
}

fn fc_host(d: &Path, host: String) -> FcHost {
    let a = |n: &str| read_attr(&d.join(n));
    FcHost {
        port_name: a("port_name"),
        node_name: a("node_name"),
        port_id: a("port_id"),
        port_state: a("port_state"),
        port_type: a("port_type"),
        speed: a("speed"),
        fabric_name: a("fabric_name"),
        symbolic_name: a("symbolic_name"),
        maxframe_size: a("maxframe_size"),
        host,
    }
}

/// Software FCoE builds `.../net/IF/ctlr_N/hostH/rport-…`: the interface is the directory
/// under `net` above the controller.
fn fcoe_netdev(rport: &Path) -> Option<String> {
    let host = rport.parent()?;
    let ctlr = host.parent()?;
    if !digits_after(&name_of(ctlr), "ctlr_") {
        return None;
    }
    let iface = ctlr.parent()?;
    (name_of(iface.parent()?) == "net").then(|| name_of(iface))
}

fn iscsi_portal(root: &Path, session_no: &str) -> Option<String> {
    let dir = under(root, "/sys/class/iscsi_connection");
    let prefix = format!("connection{session_no}:");
    let mut conns: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    conns.sort();
    let c = conns.first()?;
    let addr =
        read_attr(&c.join("persistent_address")).or_else(|| read_attr(&c.join("address")))?;
    let port = read_attr(&c.join("persistent_port")).or_else(|| read_attr(&c.join("port")));
    Some(match port {
        Some(p) if addr.contains(':') => format!("[{addr}]:{p}"),
        Some(p) => format!("{addr}:{p}"),
        None => addr,
    })
}
