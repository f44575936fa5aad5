//! Multipath block devices, labelled with their paths (docs/KERNEL-TRANSPORTS.md, "Multipath").
//!
//! * **dm-multipath**: `dm-N` with a `dm/` directory whose uuid starts `mpath-` (what
//!   multipath-tools gives its maps) or whose `dmsetup table` is a `multipath` target; its paths
//!   are the block devices under `slaves/`, each labelled as a device of its own (an iSCSI
//!   session's portal, an FC remote port, an NVMe controller). `dmsetup table` and `status`,
//!   when dmsetup runs, add the path selector, the features (`queue_if_no_path`), the table's
//!   path order and each path's state and fail count as the kernel's multipath target sees it.
//! * **NVMe native multipath**: a namespace head `nvmeSnH` under `nvme-subsysS`; each
//!   controller `nvmeC` of the subsystem reaches it through the hidden path device `nvmeScCnH`
//!   (under the controller's directory), whose `ana_state` says how the target sees the path.

use std::path::{Path, PathBuf};

use super::dmsetup::{parse_status, parse_table, Status, Table};
use super::{classify, digits_after, name_of, net_iface, nvme, InspectOptions, Transport};
use crate::cmd::run;
use crate::fsutil::{read_attr, under};

pub use sanbench_doc::manifest::MultipathPath;

/// Deeper than this, a dm device's slaves are not followed (a stack of maps, or a loop in a
/// fixture tree).
const MAX_DEPTH: u32 = 3;

/// `dmsetup SUBCOMMAND NAME`, parsed; `None` when dmsetup cannot run or says something else.
fn dmsetup<T>(
    opts: &InspectOptions,
    sub: &str,
    name: &str,
    parse: fn(&str) -> Option<T>,
) -> Option<T> {
    let mut argv = opts.dmsetup.clone();
    argv.extend([sub.to_string(), name.to_string()]);
    run(&argv, opts.timeout).ok().and_then(|out| parse(&out))
}

/// The dm-multipath device at `disk` (`.../block/dm-N`), or `None` when it is no dm device or
/// another kind of map.
pub(super) fn dm_multipath(
    root: &Path,
    disk: &Path,
    name: &str,
    opts: &InspectOptions,
    depth: u32,
) -> Option<Transport> {
    let dm = disk.join("dm");
    if !dm.is_dir() || depth > MAX_DEPTH {
        return None;
    }
    let dm_name = read_attr(&dm.join("name")).filter(|s| !s.is_empty());
    let uuid = read_attr(&dm.join("uuid")).filter(|s| !s.is_empty());
    let table: Option<Table> = dm_name
        .as_deref()
        .and_then(|n| dmsetup(opts, "table", n, parse_table));
    let is_mpath = uuid.as_deref().is_some_and(|u| u.starts_with("mpath-")) || table.is_some();
    if !is_mpath {
        return None;
    }
    let status: Option<Status> = dm_name
        .as_deref()
        .and_then(|n| dmsetup(opts, "status", n, parse_status));
    // The slaves, in the table's order where there is one.
    let mut slaves: Vec<(String, PathBuf, Option<String>)> = std::fs::read_dir(disk.join("slaves"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let dir = std::fs::canonicalize(e.path()).ok()?;
                    let dev = read_attr(&dir.join("dev"));
                    Some((name_of(&dir), dir, dev))
                })
                .collect()
        })
        .unwrap_or_default();
    let order: Vec<&str> = table
        .iter()
        .flat_map(|t| {
            t.groups
                .iter()
                .flat_map(|g| g.paths.iter().map(String::as_str))
        })
        .collect();
    slaves.sort_by_key(|(n, _, dev)| {
        let at = dev
            .as_deref()
            .and_then(|d| order.iter().position(|o| *o == d))
            .unwrap_or(usize::MAX);
        (at, n.clone())
    });
    let paths = slaves
        .into_iter()
        .map(|(device, dir, dev)| {
            let transport = classify(root, &dir, &device, opts, depth + 1);
            let seen = status.as_ref().and_then(|s| {
                s.groups
                    .iter()
                    .flat_map(|g| &g.paths)
                    .find(|p| Some(&p.dev) == dev.as_ref())
            });
            MultipathPath {
                label: transport.label(),
                net: transport.remote_addr().map(|a| net_iface(root, &a, opts)),
                state: seen.map(|p| if p.active { "active" } else { "failed" }.to_string()),
                fail_count: seen.map(|p| p.fail_count),
                ana_state: None,
                device,
                dev,
                transport,
            }
        })
        .collect();
    let group = table.as_ref().and_then(|t| t.groups.first());
    Some(Transport::DmMultipath {
        device: name.to_string(),
        dm_name,
        uuid,
        selector: group.map(|g| g.selector.clone()),
        features: table
            .as_ref()
            .map(|t| t.features.clone())
            .unwrap_or_default(),
        hw_handler: table.as_ref().and_then(|t| t.hw_handler.first().cloned()),
        paths,
    })
}

/// The NVMe namespace head `head` (`nvmeSnH`) in the subsystem directory `subsys`: the first
/// controller's transport (as before paths were listed), the subsystem's I/O policy, and
/// every controller's path with its ANA state.
pub(super) fn nvme_head(
    root: &Path,
    subsys: &Path,
    head: &str,
    opts: &InspectOptions,
) -> Option<Transport> {
    let mut ctrls: Vec<String> = std::fs::read_dir(subsys)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| digits_after(n, "nvme"))
                .collect()
        })
        .unwrap_or_default();
    ctrls.sort_by_key(|c| (c.len(), c.clone()));
    let first = ctrls.first()?;
    // nvmeSnH: S is the subsystem's instance, H the head's.
    let (s, h) = head.strip_prefix("nvme")?.split_once('n')?;
    let paths = ctrls
        .iter()
        .filter_map(|ctl| {
            let c = ctl.strip_prefix("nvme")?;
            let device = format!("nvme{s}c{c}n{h}");
            let dir = [
                under(root, "/sys/class/nvme").join(ctl).join(&device),
                under(root, "/sys/class/block").join(&device),
            ]
            .into_iter()
            .find_map(|p| std::fs::canonicalize(p).ok())?;
            let transport = nvme(root, ctl);
            Some(MultipathPath {
                label: transport.label(),
                dev: read_attr(&dir.join("dev")),
                net: transport.remote_addr().map(|a| net_iface(root, &a, opts)),
                state: None,
                fail_count: None,
                ana_state: read_attr(&dir.join("ana_state")),
                device,
                transport,
            })
        })
        .collect();
    let mut t = nvme(root, first);
    if let Transport::Nvme {
        subsystem,
        iopolicy,
        paths: ps,
        ..
    } = &mut t
    {
        *subsystem = Some(name_of(subsys));
        *iopolicy = read_attr(&subsys.join("iopolicy"));
        *ps = paths;
    }
    Some(t)
}
