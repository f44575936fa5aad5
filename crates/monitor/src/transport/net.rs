//! The network side of a transport: the interface toward a networked target (`ip route get`,
//! or given), its MTU and its `ethtool -k` offloads (docs/MEASURE.md, "Network").

use super::InspectOptions;
use crate::cmd::run;
use crate::fsutil::{read_attr, under};
use std::collections::BTreeMap;
use std::path::Path;

pub use sanbench_doc::manifest::NetIface;

/// Parses `ethtool -k IF`: `name: on|off [fixed]` lines, indented children included.
pub fn parse_ethtool_k(text: &str) -> BTreeMap<String, bool> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let v = v.trim();
            let on = if v.starts_with("on") {
                true
            } else if v.starts_with("off") {
                false
            } else {
                return None;
            };
            Some((k.trim().to_string(), on))
        })
        .collect()
}

/// The `ethtool -k` features recorded for an interface: those a TCP storage stream passes
/// through (checksums, segmentation and its TCP variants, receive coalescing, scatter-gather,
/// receive hashing, DMA above 4 GiB, the copy on transmit). The other fifty or so (VLAN, FCoE,
/// tunnels, IPsec, TLS and HSR offloads) were 2 kB of every cell of a comparison and say
/// nothing about it; they are left out.
pub const STORAGE_OFFLOADS: [&str; 14] = [
    "rx-checksumming",
    "tx-checksumming",
    "scatter-gather",
    "tcp-segmentation-offload",
    "tx-tcp-segmentation",
    "tx-tcp6-segmentation",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "large-receive-offload",
    "rx-gro-hw",
    "rx-gro-list",
    "receive-hashing",
    "highdma",
    "tx-nocache-copy",
];

/// The `dev X` of `ip route get` output.
pub fn parse_route_dev(text: &str) -> Option<String> {
    let mut it = text.split_ascii_whitespace();
    while let Some(t) = it.next() {
        if t == "dev" {
            return it.next().map(str::to_string);
        }
    }
    None
}

/// The interface toward `addr` (by `ip route get`, or `opts.iface`), with its MTU and offloads:
/// what a networked target (NBD, iSCSI) sits behind.
pub fn net_iface(root: &Path, addr: &str, opts: &InspectOptions) -> NetIface {
    let mut notes = Vec::new();
    let name = match &opts.iface {
        Some(i) => Some(i.clone()),
        None => {
            let mut argv = opts.ip_route_get.clone();
            argv.push(addr.to_string());
            match run(&argv, opts.timeout) {
                Ok(out) => parse_route_dev(&out),
                Err(e) => {
                    notes.push(e.note());
                    None
                }
            }
        }
    };
    let Some(name) = name else {
        notes.push(format!("no interface found toward {addr}"));
        return NetIface {
            note: Some(notes.join("; ")),
            ..Default::default()
        };
    };
    let mtu = read_attr(&under(root, "/sys/class/net").join(&name).join("mtu"))
        .and_then(|s| s.parse().ok());
    let mut argv = opts.ethtool.clone();
    argv.push(name.clone());
    let offloads = match run(&argv, opts.timeout) {
        Ok(out) => parse_ethtool_k(&out)
            .into_iter()
            .filter(|(k, _)| STORAGE_OFFLOADS.contains(&k.as_str()))
            .collect(),
        Err(e) => {
            notes.push(e.note());
            BTreeMap::new()
        }
    };
    NetIface {
        name,
        mtu,
        offloads,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_and_route() {
        let k = "Features for eth0:\nrx-checksumming: on\ntx-checksumming: on\n\
                 \ttx-checksum-ipv4: off [fixed]\ntcp-segmentation-offload: on\n\
                 generic-receive-offload: on\nlarge-receive-offload: off [fixed]\n";
        let m = parse_ethtool_k(k);
        assert_eq!(m.get("rx-checksumming"), Some(&true));
        assert_eq!(m.get("tx-checksum-ipv4"), Some(&false));
        assert_eq!(m.get("large-receive-offload"), Some(&false));
        assert!(!m.contains_key("Features for eth0"));
        assert_eq!(
            parse_route_dev("10.0.0.2 dev veth1 src 10.0.0.1 uid 0\n    cache\n"),
            Some("veth1".into())
        );
        assert_eq!(parse_route_dev("local 127.0.0.1 via"), None);
    }
}
