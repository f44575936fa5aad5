//! `sanbench discover nvme+tcp://HOST[:PORT]`: the discovery log of an NVMe/TCP discovery
//! controller (port 8009 unless given; sanbench's own target and Linux's nvmet answer on their
//! I/O port too), one line per record with the URI `run` opens, or `--json`.

use serde_json::json;

use crate::args::DiscoverArgs;
use sanbench_nvme::wire::discovery::{Record, TRTYPE_TCP};
use sanbench_session::error::CliError;

/// The `nvme+tcp://` URI of a TCP record (IPv6 addresses in brackets); none for others.
fn uri_of(r: &Record) -> Option<String> {
    if r.trtype != TRTYPE_TCP {
        return None;
    }
    let host = if r.traddr.contains(':') {
        format!("[{}]", r.traddr)
    } else {
        r.traddr.clone()
    };
    Some(format!("nvme+tcp://{host}:{}/{}", r.trsvcid, r.subnqn))
}

pub fn run(a: DiscoverArgs) -> Result<(), CliError> {
    let (genctr, recs) = sanbench_nvme::initiator::discover(&a.uri)?;
    if a.json {
        let list: Vec<_> = recs
            .iter()
            .map(|r| {
                json!({
                    "trtype": r.trtype_name(),
                    "adrfam": r.adrfam_name(),
                    "subtype": r.subtype_name(),
                    "portid": r.portid,
                    "trsvcid": r.trsvcid,
                    "traddr": r.traddr,
                    "subnqn": r.subnqn,
                    "uri": uri_of(r),
                })
            })
            .collect();
        outln!("{}", serde_json::Value::Array(list));
        return Ok(());
    }
    outln!("{}: {} record(s), generation {genctr}", a.uri, recs.len());
    for (i, r) in recs.iter().enumerate() {
        outln!(
            "{i:3}  trtype {}  adrfam {}  traddr {}  trsvcid {}  subtype {}  portid {}",
            r.trtype_name(),
            r.adrfam_name(),
            r.traddr,
            r.trsvcid,
            r.subtype_name(),
            r.portid
        );
        outln!("     subnqn {}", r.subnqn);
        if let Some(u) = uri_of(r) {
            outln!("     {u}");
        }
    }
    Ok(())
}
