//! Helpers shared by the tests that start real peer processes (nbdkit, qemu-nbd, tgtd).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// A loopback TCP port for a peer process to listen on.
///
/// Asking the kernel for one (`bind` to port 0, then close) races: until the peer binds it, the
/// kernel may hand the same port to any other `bind(0)` or outgoing connection in the test run
/// (tests run in parallel), and the test then talks to the wrong process. So ports come from
/// the 12000 below the kernel's ephemeral range (`ip_local_port_range`, 32768-60999 by
/// default), which the kernel never hands out by itself; within a process they are handed out
/// in turn from a start that depends on the process id, and each is checked free with a bind.
pub fn free_port() -> u16 {
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let low = ephemeral_low().saturating_sub(SPAN).max(1024);
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..SPAN {
        let port = low + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{}", low + SPAN);
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_free_distinct_and_below_the_ephemeral_range() {
        let a: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(a.len(), b.len(), "{a:?}");
        let low = ephemeral_low();
        assert!(a.iter().all(|&p| u32::from(p) < low && p >= 1024), "{a:?}");
        assert!(a
            .iter()
            .all(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok()));
    }
}
