//! `--metrics-listen`: the endpoint bound before any I/O (a port in use or an address not on
//! this host is bad input: one line, exit 2), fed by the run's intervals, the host's CPU
//! read at each scrape.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sanbench_engine::run::IntervalRecord;
use sanbench_metrics::expo::{Key, Registry};
use sanbench_metrics::server::Endpoint;
use sanbench_monitor::cpu::{CpuBreakdown, StatReader, StatSnapshot};

use crate::error::{usage, CliError};

/// Binds `addr` and serves `/metrics` for the rest of the process.
pub fn start(addr: SocketAddr) -> Result<Arc<Registry>, CliError> {
    let ep = Endpoint::bind(addr).map_err(|e| usage(format!("--metrics-listen {addr}: {e}")))?;
    let registry = Arc::new(Registry::default());
    let reader = Mutex::new((StatReader::new(std::path::Path::new("/")), None));
    let refresh = Box::new(move |r: &Registry| {
        let mut g = sanbench_engine::poison::lock(&reader);
        let (rd, prev): &mut (StatReader, Option<StatSnapshot>) = &mut g;
        let Ok(cur) = rd.snapshot() else { return };
        if let Some(p) = prev.as_ref() {
            let d = cur.total.since(&p.total);
            if d.total() > 0 {
                r.set_cpu_busy_pct(Some(CpuBreakdown::of_delta(&d).busy_pct));
            }
        }
        *prev = Some(cur);
    });
    ep.serve(registry.clone(), refresh)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("--metrics-listen: {e}")))?;
    Ok(registry)
}

/// Adds one interval of one target to its series.
pub fn add(m: &Registry, key: &Key, r: &IntervalRecord<'_>) {
    let s = r.stats;
    let dirs = [&s.read, &s.write, &s.flush];
    let open = r.latency.count() > 0 && s.read.response.count() + s.write.response.count() > 0;
    m.update(key, |ops, inflight| {
        for (o, d) in ops.iter_mut().zip(dirs) {
            o.ios += d.ios;
            o.bytes += d.bytes;
            o.errors += d.errors;
            // The headline latency: response time in an open loop (as the result's).
            let h = if open && d.response.count() > 0 {
                &d.response
            } else {
                &d.hist
            };
            for (ns, n) in h.buckets() {
                o.observe(ns, n);
            }
        }
        *inflight = r.inflight;
    });
}
