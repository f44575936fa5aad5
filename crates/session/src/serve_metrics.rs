//! `serve nbd|iscsi|nvme --metrics-listen`: the server's counters (blockstore's
//! `counters`) read at each scrape: per connection and per store (export, LUN, namespace) the
//! I/Os, bytes and errors per op, per connection the I/Os in flight, connections accepted
//! and open, the store's allocated bytes. Bound before the server serves: a port in use or an
//! address not on this host is bad input (one line, exit 2).

use std::net::SocketAddr;
use std::sync::Arc;

use sanbench_blockstore::counters::{Figures, ServerCounters, OPS};
use sanbench_metrics::expo::{labels, Exposition, Kind, Writer};
use sanbench_metrics::server::Endpoint;

use crate::error::{usage, CliError};

/// A bound endpoint, serving once the server's counters are on.
pub struct Bound(Endpoint);

/// Binds `addr` (before the server binds its own ports, so a refusal comes first).
pub fn bind(addr: SocketAddr) -> Result<Bound, CliError> {
    Endpoint::bind(addr)
        .map(Bound)
        .map_err(|e| usage(format!("--metrics-listen {addr}: {e}")))
}

struct ServeExposition {
    server: &'static str,
    counters: Arc<ServerCounters>,
    allocated: Box<dyn Fn() -> u64 + Send + Sync>,
}

impl Bound {
    /// The ready line's note: where the metrics are.
    pub fn note(&self) -> String {
        self.0.local_addr().map_or(String::new(), |a| {
            format!(", metrics at http://{a}/metrics")
        })
    }

    /// Serves `server`'s counters (`nbd`, `iscsi`, `nvme`) for the rest of the process.
    pub fn serve(
        self,
        server: &'static str,
        counters: Arc<ServerCounters>,
        allocated: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Result<(), CliError> {
        let source = Arc::new(ServeExposition {
            server,
            counters,
            allocated: Box::new(allocated),
        });
        self.0
            .serve(source)
            .map_err(|e| CliError::Failed(anyhow::anyhow!("--metrics-listen: {e}")))
    }
}

type Pick = fn(&Figures) -> u64;
const FIGURES: [(&str, &str, Option<&str>, Pick); 3] = [
    ("ios", "I/Os answered", None, |f| f.ios),
    (
        "bytes",
        "Bytes read or written (a trim's or zeroing's range)",
        Some("bytes"),
        |f| f.bytes,
    ),
    ("errors", "I/Os answered with an error", None, |f| f.errors),
];

impl Exposition for ServeExposition {
    fn render(&self, w: &mut Writer) {
        let snap = self.counters.snapshot();
        let srv = self.server;
        let name = "sanbench_server_connections_accepted";
        w.family(name, Kind::Counter, "Connections accepted.", None);
        w.sample(
            &format!("{name}_total"),
            &labels(&[("server", srv)]),
            snap.accepted,
        );
        let name = "sanbench_server_connections_open";
        w.family(name, Kind::Gauge, "Connections open now.", None);
        w.sample(name, &labels(&[("server", srv)]), snap.open.len());
        let conn_labels: Vec<(String, String, String)> = snap
            .open
            .iter()
            .map(|c| (c.id.to_string(), c.peer.clone(), c.portal.clone()))
            .collect();
        let of_conn = |i: usize, op: Option<&str>| {
            let (id, peer, portal) = &conn_labels[i];
            let mut l = vec![
                ("server", srv),
                ("conn", id.as_str()),
                ("peer", peer.as_str()),
            ];
            l.push(("portal", portal.as_str()));
            if let Some(op) = op {
                l.push(("op", op));
            }
            labels(&l)
        };
        for (fig, help, unit, pick) in FIGURES {
            let name = format!("sanbench_server_conn_{fig}");
            w.family(
                &name,
                Kind::Counter,
                &format!("{help}, per open connection and op."),
                unit,
            );
            for (i, c) in snap.open.iter().enumerate() {
                for (o, op) in OPS.iter().enumerate() {
                    w.sample(
                        &format!("{name}_total"),
                        &of_conn(i, Some(op)),
                        pick(&c.ops[o]),
                    );
                }
            }
        }
        let name = "sanbench_server_conn_inflight";
        w.family(
            name,
            Kind::Gauge,
            "I/Os received and not yet answered (replies held by --delay, writes whose data is \
             still to come), per open connection.",
            None,
        );
        for (i, c) in snap.open.iter().enumerate() {
            w.sample(name, &of_conn(i, None), c.inflight);
        }
        for (fig, help, unit, pick) in FIGURES {
            let name = format!("sanbench_server_store_{fig}");
            w.family(
                &name,
                Kind::Counter,
                &format!("{help}, per store (export, LUN, namespace) and op, every connection's."),
                unit,
            );
            for (store, figs) in &snap.stores {
                for (o, op) in OPS.iter().enumerate() {
                    let l = labels(&[("server", srv), ("store", store), ("op", op)]);
                    w.sample(&format!("{name}_total"), &l, pick(&figs[o]));
                }
            }
        }
        let name = "sanbench_server_allocated_bytes";
        w.family(
            name,
            Kind::Gauge,
            "Bytes the server's stores hold (RAM chunks written, or the file's allocated blocks).",
            Some("bytes"),
        );
        w.sample(name, &labels(&[("server", srv)]), (self.allocated)());
    }
}
