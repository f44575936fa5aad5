//! The environment manifest a result carries (docs/MEASURE.md, "Repeatability"): sanbench
//! version, kernel, CPU, memory, host name, start time, the target device's transport (FC with
//! both ports, FCoE, iSCSI or iSER, NVMe over fabrics, dm-multipath and NVMe native
//! multipath), the precondition of each target and the placement. The monitor collects it
//! (`sanbench_monitor::manifest`, `sanbench_monitor::transport`) and re-exports these types at
//! their old paths.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Manifest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sanbench_version: String,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_count: usize,
    /// `scaling_governor` of cpu0; `None` without cpufreq (VMs).
    pub governor: Option<String>,
    /// `MemTotal` in bytes.
    pub mem_total_bytes: Option<u64>,
    pub hostname: Option<String>,
    /// RFC 3339, UTC.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub start_time: String,
    pub device: Option<DeviceInfo>,
    /// Why a fact is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Whether each target's span held written data before the window (the result's
    /// `precondition` blocks, by target URI).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub precondition: BTreeMap<String, crate::precondition::Report>,
    /// What the CLI adds beside the host's facts (`placement`: the CPUs the client's
    /// streams and the servers were pinned to, `stream_cpus`): the documented extension
    /// map of the manifest.
    #[serde(flatten)]
    pub extra: sanbench_io::params::Params,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceInfo {
    /// The path as given.
    pub path: String,
    /// Kernel name of the whole disk (`sdb` for `/dev/sdb1`).
    pub name: String,
    /// [`Transport::label`], for people and reports.
    #[serde(default)]
    pub label: String,
    pub transport: Transport,
    pub size_bytes: Option<u64>,
    pub logical_block_size: Option<u64>,
    pub rotational: Option<bool>,
    pub net: Option<NetIface>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    Iscsi {
        session: String,
        target_name: Option<String>,
        tpgt: Option<String>,
        /// `address:port` of the connection's portal.
        portal: Option<String>,
        /// The session's state (`LOGGED_IN`, `FAILED`, `FREE`).
        #[serde(default)]
        state: Option<String>,
        /// The initiator's transport, iscsiadm's `iface.transport_name`: `tcp`, `iser`, or an
        /// offload driver's name (from the SCSI host's `proc_name`, `iscsi_` stripped).
        #[serde(default)]
        transport_name: Option<String>,
    },
    FibreChannel {
        /// The remote (target) port.
        rport: String,
        port_name: Option<String>,
        node_name: Option<String>,
        port_id: Option<String>,
        /// `Online`, `Blocked`, `Not Present`, …
        #[serde(default)]
        port_state: Option<String>,
        /// e.g. `FCP Target`.
        #[serde(default)]
        roles: Option<String>,
        /// The local port (`/sys/class/fc_host/hostH`) the remote port was found through.
        #[serde(default)]
        host: Option<Box<FcHost>>,
        /// The Ethernet interface under a software FCoE port (`.../net/IF/ctlr_N/hostH`).
        #[serde(default)]
        fcoe_netdev: Option<String>,
    },
    Sas {
        end_device: String,
        sas_address: Option<String>,
    },
    Nvme {
        controller: String,
        /// pcie, tcp, rdma, fc, loop.
        transport: Option<String>,
        /// e.g. `traddr=10.0.0.2,trsvcid=4420` or a PCI address.
        address: Option<String>,
        subsysnqn: Option<String>,
        /// `live`, `connecting`, `resetting`, …
        #[serde(default)]
        state: Option<String>,
        /// Native multipath: the subsystem (`nvme-subsysN`) the namespace head hangs off.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subsystem: Option<String>,
        /// Native multipath: the subsystem's `iopolicy` (`numa`, `round-robin`, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        iopolicy: Option<String>,
        /// Native multipath: every controller's path to the namespace, with its ANA state
        /// (the fields above are the first controller's).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<MultipathPath>,
    },
    /// A device-mapper multipath map over the kernel's paths.
    DmMultipath {
        /// `dm-N`.
        device: String,
        /// The map's name (`/sys/block/dm-N/dm/name`).
        dm_name: Option<String>,
        /// `mpath-WWID` when multipath-tools made it.
        uuid: Option<String>,
        /// The path selector (`round-robin`, `queue-length`, `service-time`), from
        /// `dmsetup table`.
        #[serde(default)]
        selector: Option<String>,
        /// The table's features (`queue_if_no_path`, …), from `dmsetup table`.
        #[serde(default)]
        features: Vec<String>,
        /// The hardware handler (`alua`, …), when the table has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hw_handler: Option<String>,
        /// The paths, in the table's order (or by name without dmsetup).
        paths: Vec<MultipathPath>,
    },
    Sata {
        port: String,
    },
    Usb {
        bus: String,
    },
    Virtio {
        device: String,
    },
    Loop {
        backing_file: Option<String>,
    },
    Nbd {
        pid: Option<u32>,
    },
    Unknown {
        sysfs_path: String,
    },
}

impl Transport {
    /// A short name for people: `iSCSI`, `iSER`, `FC`, `FCoE`, `NVMe/TCP`, `NVMe/RDMA`, …
    pub fn label(&self) -> String {
        match self {
            Transport::Iscsi { transport_name, .. } => match transport_name.as_deref() {
                Some("iser") => "iSER".into(),
                Some("tcp") | None => "iSCSI".into(),
                Some(other) => format!("iSCSI ({other})"),
            },
            Transport::FibreChannel { fcoe_netdev, .. } => {
                if fcoe_netdev.is_some() {
                    "FCoE".into()
                } else {
                    "FC".into()
                }
            }
            Transport::Nvme {
                transport, paths, ..
            } => {
                let base = match transport.as_deref() {
                    Some("tcp") => "NVMe/TCP".into(),
                    Some("rdma") => "NVMe/RDMA".into(),
                    Some("fc") => "NVMe/FC".into(),
                    Some("pcie") => "NVMe/PCIe".into(),
                    Some("loop") => "NVMe/loop".into(),
                    Some(t) => format!("NVMe/{t}"),
                    None => "NVMe".into(),
                };
                match paths.len() {
                    0 | 1 => base,
                    n => format!("{base} multipath ({n} paths)"),
                }
            }
            Transport::DmMultipath { paths, .. } => {
                let mut kinds: Vec<&str> = Vec::new();
                for p in paths {
                    if !kinds.contains(&p.label.as_str()) {
                        kinds.push(&p.label);
                    }
                }
                match paths.len() {
                    0 => "dm-multipath (no paths)".into(),
                    1 => format!("dm-multipath (1 path, {})", kinds.join(" + ")),
                    n => format!("dm-multipath ({n} paths, {})", kinds.join(" + ")),
                }
            }
            Transport::Sas { .. } => "SAS".into(),
            Transport::Sata { .. } => "SATA".into(),
            Transport::Usb { .. } => "USB".into(),
            Transport::Virtio { .. } => "virtio".into(),
            Transport::Loop { .. } => "loop".into(),
            Transport::Nbd { .. } => "NBD".into(),
            Transport::Unknown { .. } => "unknown".into(),
        }
    }

    /// The remote address whose route gives the network interface, for networked transports.
    pub fn remote_addr(&self) -> Option<String> {
        match self {
            Transport::Iscsi {
                portal: Some(p), ..
            } => Some(
                p.rsplit_once(':')
                    .map_or(p.as_str(), |(a, _)| a)
                    .trim_matches(['[', ']'])
                    .to_string(),
            ),
            Transport::Nvme {
                transport: Some(t),
                address: Some(a),
                ..
            } if t == "tcp" || t == "rdma" => a
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("traddr="))
                .map(str::to_string),
            _ => None,
        }
    }
}

/// A local Fibre Channel port, as `/sys/class/fc_host/hostH` has it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FcHost {
    pub host: String,
    pub port_name: Option<String>,
    pub node_name: Option<String>,
    pub port_id: Option<String>,
    /// `Online`, `Linkdown`, …
    pub port_state: Option<String>,
    /// e.g. `NPort (fabric via point-to-point)`.
    pub port_type: Option<String>,
    /// e.g. `10 Gbit`; `unknown` where the link does not say.
    pub speed: Option<String>,
    pub fabric_name: Option<String>,
    pub symbolic_name: Option<String>,
    /// e.g. `2112 bytes`.
    pub maxframe_size: Option<String>,
}

/// Interface carrying a networked transport.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetIface {
    pub name: String,
    pub mtu: Option<u32>,
    /// `ethtool -k` features a TCP storage stream passes through (checksums, segmentation,
    /// receive coalescing, scatter-gather, ...): name → on. Empty when ethtool could not run
    /// (see `note`). Documents before 2026-11-29 hold every feature ethtool listed.
    pub offloads: BTreeMap<String, bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One path of a multipath device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MultipathPath {
    /// The path's block device: `sdb`, or NVMe's hidden `nvme0c1n1`.
    pub device: String,
    /// `MAJ:MIN`, as dm tables name it (NVMe's hidden paths have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// [`Transport::label`] of the path.
    pub label: String,
    pub transport: Transport,
    /// dm-multipath's view (`dmsetup status`): `active` or `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// dm-multipath: how often the kernel failed this path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_count: Option<u64>,
    /// NVMe: the path's ANA state (`optimized`, `non-optimized`, `inaccessible`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ana_state: Option<String>,
    /// The interface toward the path's target (networked transports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetIface>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
