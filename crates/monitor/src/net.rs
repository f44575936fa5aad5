//! Network interface counters from `/proc/net/dev` (docs/MEASURE.md, "Network").
//!
//! Byte counts are what the network device saw: Ethernet headers included, preamble, FCS and
//! inter-frame gap not. So "wire bytes" here means frame bytes at the netdev, and the
//! payload-to-wire efficiency is an upper bound of the efficiency on the cable. On `lo` every
//! byte is counted twice (sent and received by the same device) when both peers are local.

use crate::error::{MonitorError, Result};
use crate::fsutil::{read_into, under};
pub use sanbench_doc::host::{IfaceUsage, NetCounters, NetReport};
use std::path::{Path, PathBuf};

/// One reading of `/proc/net/dev`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetSnapshot {
    pub ifaces: Vec<(String, NetCounters)>,
}

/// Parses `/proc/net/dev`: two header lines, then `name: rx_bytes rx_packets errs drop fifo
/// frame compressed multicast tx_bytes tx_packets ...`.
pub fn parse_net_dev(text: &str, out: &mut NetSnapshot) -> std::result::Result<(), String> {
    out.ifaces.clear();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let mut v = [0u64; 10];
        let mut n = 0;
        for (slot, tok) in v.iter_mut().zip(rest.split_ascii_whitespace()) {
            *slot = tok
                .parse()
                .map_err(|_| format!("bad counter {tok:?} for {}", name.trim()))?;
            n += 1;
        }
        if n < 10 {
            return Err(format!("short line for {}", name.trim()));
        }
        out.ifaces.push((
            name.trim().to_string(),
            NetCounters {
                rx_bytes: v[0],
                rx_packets: v[1],
                tx_bytes: v[8],
                tx_packets: v[9],
            },
        ));
    }
    Ok(())
}

/// Reads `/proc/net/dev` under a root with a reused buffer.
#[derive(Debug)]
pub struct NetReader {
    path: PathBuf,
    buf: String,
}

impl NetReader {
    pub fn new(root: &Path) -> Self {
        NetReader {
            path: under(root, "/proc/net/dev"),
            buf: String::with_capacity(4096),
        }
    }

    pub fn snapshot(&mut self) -> Result<NetSnapshot> {
        read_into(&self.path, &mut self.buf)?;
        let mut s = NetSnapshot::default();
        parse_net_dev(&self.buf, &mut s).map_err(|r| MonitorError::parse(&self.path, r))?;
        Ok(s)
    }
}

/// Traffic between two readings of every interface present in both.
pub fn between(a: &NetSnapshot, b: &NetSnapshot) -> NetReport {
    let mut r = NetReport::default();
    for (name, cur) in &b.ifaces {
        let Some((_, prev)) = a.ifaces.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let d = cur.since(prev);
        if name != "lo" {
            r.total.add(&d);
        }
        r.interfaces.push(IfaceUsage {
            name: name.clone(),
            counters: d,
        });
    }
    r
}

/// A NIC's line rate in bits per second from `/sys/class/net/IF/speed` (Mb/s, what ethtool
/// reports as Speed). `None` where the kernel has none: loopback, bridges, a link that is down
/// (-1), virtual devices whose figure is nominal; a shaped link's rate (tc) is not read here.
pub fn link_speed_bits(root: &Path, iface: &str) -> Option<u64> {
    if iface.is_empty() || iface.contains('/') || iface == "." || iface == ".." {
        return None;
    }
    let p = under(root, "/sys/class/net").join(iface).join("speed");
    let mbit: i64 = crate::fsutil::read_attr(&p)?.parse().ok()?;
    (mbit > 0).then(|| mbit as u64 * 1_000_000)
}

/// Protocol efficiency: payload bytes ÷ wire bytes (rx + tx of the interfaces carrying the
/// traffic), so protocol headers, requests, acknowledgements and retransmissions lower it.
/// `None` when nothing crossed the wire.
pub fn wire_efficiency(payload_bytes: u64, wire: &NetCounters) -> Option<f64> {
    let w = wire.bytes();
    (w > 0).then(|| payload_bytes as f64 / w as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n  \
eth0: 5000000   4000    0    0    0     0          0         0   200000    1500    0    0    0     0       0          0\n";
    const B: &str = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:    3000      30    0    0    0     0          0         0     3000      30    0    0    0     0       0          0\n  \
eth0: 9200000   7000    0    0    0     0          0         0   300000    2500    0    0    0     0       0          0\n";

    #[test]
    fn deltas_and_efficiency() {
        let (mut a, mut b) = (NetSnapshot::default(), NetSnapshot::default());
        parse_net_dev(A, &mut a).unwrap();
        parse_net_dev(B, &mut b).unwrap();
        let r = between(&a, &b);
        assert_eq!(r.interfaces.len(), 2);
        let eth = r.sum_of(&["eth0"]);
        assert_eq!(eth.rx_bytes, 4_200_000);
        assert_eq!(eth.tx_bytes, 100_000);
        assert_eq!(eth.rx_packets, 3000);
        assert_eq!(eth.tx_packets, 1000);
        // lo is listed but not in the total.
        assert_eq!(r.total, eth);
        // 4 MiB of payload read over 4.3 MB of frames.
        let e = wire_efficiency(4 * 1024 * 1024, &eth).unwrap();
        assert!((e - 4_194_304.0 / 4_300_000.0).abs() < 1e-12);
        assert!(wire_efficiency(1, &NetCounters::default()).is_none());
    }

    #[test]
    fn speeds_from_sysfs() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/host"));
        assert_eq!(link_speed_bits(root, "veth-i0"), Some(10_000_000_000));
        // Down: -1; loopback: no file.
        assert_eq!(link_speed_bits(root, "eth1"), None);
        assert_eq!(link_speed_bits(root, "lo"), None);
        assert_eq!(link_speed_bits(root, "../x"), None);
    }

    #[test]
    fn bad_lines() {
        let mut s = NetSnapshot::default();
        assert!(parse_net_dev("h\nh\neth0: 1 2 3\n", &mut s).is_err());
        assert!(parse_net_dev("h\nh\neth0: 1 2 3 4 5 6 7 8 x 10\n", &mut s).is_err());
        parse_net_dev("h\nh\n", &mut s).unwrap();
        assert!(s.ifaces.is_empty());
    }
}
