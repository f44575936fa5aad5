//! `--metrics-listen` on `run` and `compare`: the endpoint bound before any I/O (a port in use
//! or an address not on this host is bad input: one line, exit 2), fed by the run's intervals;
//! the host's CPU read from /proc/stat at each scrape (the host monitor's reader), its power
//! from the host monitor's last reading about once a second (where a source exists).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sanbench_engine::run::IntervalRecord;
use sanbench_metrics::expo::{Exposition, Writer};
use sanbench_metrics::registry::{Key, PathFigures, Registry, BOUNDS_NS, N_BOUNDS};
use sanbench_metrics::server::Endpoint;
use sanbench_monitor::cpu::{usage as cpu_usage, StatReader, StatSnapshot};

use crate::error::{usage, CliError};

/// What a run's endpoint serves: the registry, with the host's CPU read at each scrape.
struct RunExposition {
    registry: Arc<Registry>,
    /// The reader and the last snapshot (stamped as read: busy is the time between less idle,
    /// monitor's cpu.rs).
    cpu: Mutex<(StatReader, Option<StatSnapshot>)>,
    clk_tck: f64,
}

impl Exposition for RunExposition {
    fn render(&self, w: &mut Writer) {
        {
            let mut g = sanbench_engine::poison::lock(&self.cpu);
            let (rd, prev) = &mut *g;
            if let Ok(cur) = rd.snapshot() {
                let t = &cur.total;
                let busy = prev.as_ref().and_then(|p| {
                    let hz = self.clk_tck as u64;
                    let d = t.since(&p.total);
                    (d.total() > 0).then(|| cpu_usage(p, &cur, hz).total.busy_pct / 100.0)
                });
                let s = |ticks: u64| ticks as f64 / self.clk_tck;
                let seconds = vec![
                    ("user", s(t.user)),
                    ("nice", s(t.nice)),
                    ("system", s(t.system)),
                    ("idle", s(t.idle)),
                    ("iowait", s(t.iowait)),
                    ("irq", s(t.irq)),
                    ("softirq", s(t.softirq)),
                    ("steal", s(t.steal)),
                ];
                self.registry.host(|h| {
                    if busy.is_some() {
                        h.cpu_busy_ratio = busy;
                    }
                    h.cpu_seconds = seconds;
                });
                *prev = Some(cur);
            }
        }
        Exposition::render(&*self.registry, w);
    }
}

/// Binds `addr` and serves `/metrics` for the rest of the process. The registry returned is
/// the context's (context.rs keeps it, and the run's observer gives it the monitor's power
/// readings).
pub fn start(addr: SocketAddr) -> Result<Arc<Registry>, CliError> {
    let ep = Endpoint::bind(addr).map_err(|e| usage(format!("--metrics-listen {addr}: {e}")))?;
    let registry = Arc::new(Registry::default());
    let source = Arc::new(RunExposition {
        registry: registry.clone(),
        cpu: Mutex::new((StatReader::new(std::path::Path::new("/")), None)),
        clk_tck: sanbench_monitor::fsutil::clk_tck() as f64,
    });
    ep.serve(source)
        .map_err(|e| CliError::Failed(anyhow::anyhow!("--metrics-listen: {e}")))?;
    Ok(registry)
}

/// The host monitor's last power reading (watts, source, modeled), for the endpoint.
pub fn host_power(r: &Registry, reading: Option<(f64, String, bool)>) {
    if let Some(p) = reading {
        r.host(|h| h.power = Some(p));
    }
}

/// Adds one interval of one target to its series.
pub fn add(m: &Registry, key: &Key, r: &IntervalRecord<'_>) {
    let s = r.stats;
    let dirs = [&s.read, &s.write, &s.flush];
    let open = r.latency.count() > 0 && s.read.response.count() + s.write.response.count() > 0;
    m.update(key, |series| {
        for (o, d) in series.ops.iter_mut().zip(dirs) {
            o.ios += d.ios;
            o.bytes += d.bytes;
            o.errors += d.errors;
            // The headline latency: response time in an open loop (as the result's).
            let h = if open && d.response.count() > 0 {
                &d.response
            } else {
                &d.hist
            };
            if h.count() > 0 {
                let mut split = [0u64; N_BOUNDS];
                let over = h.split_by_bounds(&BOUNDS_NS, &mut split);
                o.observe_split(&split, over, h.sum_ns());
            }
        }
        series.inflight = r.inflight;
        if series.paths.len() < s.paths.len() {
            series.paths.resize(s.paths.len(), PathFigures::default());
        }
        for (f, p) in series.paths.iter_mut().zip(&s.paths) {
            f.ios += p.read_ios + p.write_ios;
            f.bytes += p.read_bytes + p.write_bytes;
        }
    });
}
