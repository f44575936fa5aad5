//! `serve` (sanbench's own targets) and `discover`: the network side of the command line.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use sanbench_blockstore::delay::Delay;
use sanbench_engine::units::{Bytes, Dur};
use sanbench_nvme::target::AnaSetting;

#[derive(Subcommand, Debug)]
pub enum ServeCommand {
    /// An NBD server (fixed newstyle, structured replies, multi-conn), RAM-backed by default.
    Nbd(ServeNbdArgs),
    /// An iSCSI target with RAM-backed LUNs (numbered from 0), discovery, digests, CHAP.
    Iscsi(ServeIscsiArgs),
    /// An NVMe/TCP target: a discovery controller and one NVM subsystem whose namespaces
    /// (--namespaces) are RAM-backed (or a file), several I/O queues, digests, keep-alive.
    Nvme(ServeNvmeArgs),
}

#[derive(Args, Debug, Clone)]
pub struct DiscoverArgs {
    /// The discovery controller: nvme+tcp://HOST[:PORT] (8009 unless given).
    #[arg(value_name = "URI")]
    pub uri: String,
    /// Print the records as a JSON array (trtype, adrfam, subtype, portid, trsvcid, traddr,
    /// subnqn, uri).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServeNvmeArgs {
    /// Size of each namespace (RAM is allocated as written).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Bytes>,
    /// Namespaces 1..=N, each of --size (with --file: the file holds them side by side);
    /// nvme+tcp://HOST:PORT/NQN/NSID selects one.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub namespaces: u32,
    /// Where to listen; repeat for several portals of the same store and identity
    /// (multipath): the URI printed then names them all.
    #[arg(long, default_value = "127.0.0.1:4420", value_name = "ADDR")]
    pub listen: Vec<String>,
    /// The NVM subsystem's NQN.
    #[arg(
        long,
        default_value = "nqn.2026-11.io.sanbench:ram",
        value_name = "NQN"
    )]
    pub nqn: String,
    /// Emulated latency: every I/O's reply leaves no sooner than D after its request
    /// arrived, plus a uniform random extra in [0, JITTER] per I/O (seeded per connection);
    /// replies wait side by side, so a client at queue depth N sees about N I/Os per D.
    /// 0 (the default) answers at once; at most 60s in all.
    #[arg(
        long,
        default_value = "0",
        value_name = "D[,JITTER]",
        allow_hyphen_values = true
    )]
    pub delay: ReplyDelay,
    /// Pin the server's threads to these CPUs (0, 0,2, 0-3), e.g. away from the client's.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<sanbench_session::placement::CpuList>,
    /// Back the namespace with this file instead of RAM (created or extended to --size).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Allocate and touch all RAM (or the file's blocks) at start, so that no first write
    /// pays for allocation inside a measurement.
    #[arg(long)]
    pub prealloc: bool,
    /// A port's ANA state (repeatable; every other port is optimized): PORT is the port's
    /// 1-based index in --listen order (the discovery log's PORTID) or its address; STATE
    /// optimized, non-optimized, inaccessible, persistent-loss or change. The namespaces are
    /// one ANA group whose state hosts see per port.
    #[arg(long = "ana", value_name = "PORT=STATE")]
    pub ana: Vec<AnaSetting>,
    /// Serve live metrics at http://ADDR:PORT/metrics (Prometheus text, or OpenMetrics when
    /// the scraper asks for it): per connection and per namespace I/Os, bytes and errors per op,
    /// I/Os in flight, connections accepted and open. PORT alone listens on 127.0.0.1; any
    /// other address only when given.
    #[arg(help_heading = super::H_WATCH, long, value_name = "[ADDR:]PORT", value_parser = super::metrics_listen)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Open a control socket at PATH (mode 0600) through which `sanbench ana --control PATH`
    /// reads and changes the ports' ANA states while the target runs; removed at exit.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct AnaArgs {
    /// The control socket of a running `sanbench serve nvme --control PATH`.
    #[arg(long, value_name = "PATH")]
    pub control: PathBuf,
    /// States to set, all or none (PORT: 1-based index in --listen order, or the address;
    /// STATE: optimized, non-optimized, inaccessible, persistent-loss, change). Without
    /// any: print the states.
    #[arg(value_name = "PORT=STATE")]
    pub settings: Vec<AnaSetting>,
    /// Print the ports as a JSON array (index, addr, state).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServeIscsiArgs {
    /// Size of each LUN (RAM is allocated as written).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Bytes>,
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub luns: u32,
    /// Where to listen; repeat for several portals of the same store and identity
    /// (multipath): the URI printed then names them all.
    #[arg(long, default_value = "127.0.0.1:3260", value_name = "ADDR")]
    pub listen: Vec<String>,
    #[arg(
        long,
        default_value = "iqn.2026-11.io.sanbench:ram",
        value_name = "IQN"
    )]
    pub iqn: String,
    /// Emulated latency: every I/O's reply leaves no sooner than D after its request
    /// arrived, plus a uniform random extra in [0, JITTER] per I/O (seeded per connection);
    /// replies wait side by side, so a client at queue depth N sees about N I/Os per D.
    /// 0 (the default) answers at once; at most 60s in all.
    #[arg(
        long,
        default_value = "0",
        value_name = "D[,JITTER]",
        allow_hyphen_values = true
    )]
    pub delay: ReplyDelay,
    /// Pin the server's threads to these CPUs (0, 0,2, 0-3), e.g. away from the client's.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<sanbench_session::placement::CpuList>,
    /// Require CHAP from initiators (visible to every user of the host in `ps`: prefer
    /// --chap-file).
    #[arg(help_heading = super::H_AUTH, long, value_name = "USER:SECRET", conflicts_with = "chap_file")]
    pub chap: Option<String>,
    /// Require CHAP from initiators, USER:SECRET read from the first line of FILE.
    #[arg(help_heading = super::H_AUTH, long, value_name = "FILE")]
    pub chap_file: Option<PathBuf>,
    /// The target's own CHAP name and secret, for initiators that ask it to prove itself
    /// (mutual CHAP; needs --chap, and a different secret).
    #[arg(help_heading = super::H_AUTH, long, value_name = "NAME:SECRET", conflicts_with = "target_chap_file")]
    pub target_chap: Option<String>,
    /// The target's own NAME:SECRET (mutual CHAP), read from the first line of FILE.
    #[arg(help_heading = super::H_AUTH, long, value_name = "FILE")]
    pub target_chap_file: Option<PathBuf>,
    /// Serve live metrics at http://ADDR:PORT/metrics (Prometheus text, or OpenMetrics when
    /// the scraper asks for it): per connection and per LUN I/Os, bytes and errors per op,
    /// I/Os in flight, connections accepted and open. PORT alone listens on 127.0.0.1; any
    /// other address only when given.
    #[arg(help_heading = super::H_WATCH, long, value_name = "[ADDR:]PORT", value_parser = super::metrics_listen)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Back LUN 0 with this file instead of RAM.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Allocate and touch all RAM (or the file's blocks) at start, so that no first write
    /// pays for allocation inside a measurement.
    #[arg(long)]
    pub prealloc: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServeNbdArgs {
    /// Export size (RAM is allocated as written, so a large export costs only what is written).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Bytes>,
    /// Where to listen; repeat for several portals of the same store and identity
    /// (multipath): the URI printed then names them all.
    #[arg(long, default_value = "127.0.0.1:10809", value_name = "ADDR")]
    pub listen: Vec<String>,
    /// Export name (clients asking for "" get it too).
    #[arg(long, default_value = "", value_name = "NAME")]
    pub export: String,
    /// Emulated latency: every I/O's reply leaves no sooner than D after its request
    /// arrived, plus a uniform random extra in [0, JITTER] per I/O (seeded per connection);
    /// replies wait side by side, so a client at queue depth N sees about N I/Os per D.
    /// 0 (the default) answers at once; at most 60s in all.
    #[arg(
        long,
        default_value = "0",
        value_name = "D[,JITTER]",
        allow_hyphen_values = true
    )]
    pub delay: ReplyDelay,
    /// Pin the server's threads to these CPUs (0, 0,2, 0-3), e.g. away from the client's.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<sanbench_session::placement::CpuList>,
    #[arg(long)]
    pub read_only: bool,
    /// Serve this file instead of RAM (created or extended to --size).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Longest a connection waits for a pipelining client's requests to gather before it
    /// wakes (interrupt moderation; clients that wait for each reply are never delayed);
    /// 0 wakes for every request.
    #[arg(long, default_value = "200us", value_name = "DURATION")]
    pub coalesce: Dur,
    /// Allocate and touch all RAM (or the file's blocks) at start, so that no first write
    /// pays for allocation inside a measurement.
    #[arg(long)]
    pub prealloc: bool,
    /// Serve live metrics at http://ADDR:PORT/metrics (Prometheus text, or OpenMetrics when
    /// the scraper asks for it): per connection and per export I/Os, bytes and errors per op,
    /// I/Os in flight, connections accepted and open. PORT alone listens on 127.0.0.1; any
    /// other address only when given.
    #[arg(help_heading = super::H_WATCH, long, value_name = "[ADDR:]PORT", value_parser = super::metrics_listen)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// NBD over TLS (NBD_OPT_STARTTLS): off, on (offered) or require (plaintext clients are
    /// refused); require when credentials are given, else off.
    #[arg(help_heading = super::H_TLS, long, value_name = "MODE", value_parser = parse_tls_mode)]
    pub tls: Option<sanbench_nbd::server::TlsMode>,
    /// X.509 credentials: a directory with server-cert.pem and server-key.pem (nbdkit's layout).
    #[arg(help_heading = super::H_TLS, long, value_name = "DIR", conflicts_with = "tls_psk")]
    pub tls_certificates: Option<PathBuf>,
    /// Pre-shared keys: a psktool file of username:hexkey lines (needs --features tls-psk).
    #[arg(help_heading = super::H_TLS, long, value_name = "FILE")]
    pub tls_psk: Option<PathBuf>,
    /// Require a client certificate signed by --tls-certificates DIR/ca-cert.pem and not
    /// revoked by DIR/ca-crl.pem if present (nbdkit's --tls-verify-peer): a client without
    /// one fails its TLS handshake and is logged.
    #[arg(help_heading = super::H_TLS, long)]
    pub tls_verify_peer: bool,
    /// Kernel TLS: auto hands each connection's records to the kernel after the handshake
    /// where it can make them (the tls module, the cipher; X.509 sessions), off keeps them in
    /// user space.
    #[arg(help_heading = super::H_TLS, long, value_name = "MODE", default_value = "auto", value_parser = parse_ktls_mode)]
    pub ktls: sanbench_nbd::server::KtlsMode,
}

fn parse_ktls_mode(s: &str) -> Result<sanbench_nbd::server::KtlsMode, String> {
    s.parse()
}

fn parse_tls_mode(s: &str) -> Result<sanbench_nbd::server::TlsMode, String> {
    s.parse()
}

/// `--delay D[,JITTER]`, parsed once: durations as `Dur` reads them (`2ms`, `500us`; a bare
/// number is seconds), checked by [`Delay::new`]. None: no delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyDelay(pub Option<Delay>);

impl std::str::FromStr for ReplyDelay {
    type Err = String;
    fn from_str(s: &str) -> Result<ReplyDelay, String> {
        let part = |text: &str, what: &str| {
            // A leading '-' would read as "does not start with a number": say what it is.
            if text.trim_start().starts_with('-') {
                return Err(format!("{what} '{}' is negative", text.trim()));
            }
            text.parse::<Dur>().map(|d| d.0)
        };
        let (base, jitter) = match s.split_once(',') {
            Some((d, j)) => (part(d, "delay")?, part(j, "jitter")?),
            None => (part(s, "delay")?, std::time::Duration::ZERO),
        };
        Delay::new(base, jitter)
            .map(ReplyDelay)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn delays_parse_with_the_duration_units_and_bad_ones_say_why() {
        let d = |s: &str| s.parse::<ReplyDelay>().map(|r| r.0);
        let one = d("2ms").unwrap().unwrap();
        assert_eq!(
            (one.base(), one.jitter()),
            (Duration::from_millis(2), Duration::ZERO)
        );
        let two = d("1ms,500us").unwrap().unwrap();
        assert_eq!(
            (two.base(), two.jitter()),
            (Duration::from_millis(1), Duration::from_micros(500))
        );
        assert_eq!(d("0"), Ok(None));
        assert!(d("-1ms").unwrap_err().contains("negative"));
        assert!(d("1ms,-1ms")
            .unwrap_err()
            .contains("jitter '-1ms' is negative"));
        assert!(d("0,1ms").unwrap_err().contains("needs a delay"));
        assert!(d("soon").unwrap_err().contains("not start with a number"));
        assert!(d("61s").unwrap_err().contains("above the limit"));
        assert!(d("59s,2s").unwrap_err().contains("above the limit"));
        assert!(d("1ms,").is_err());
    }
}
