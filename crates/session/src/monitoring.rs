//! Wires the host monitors (crates/monitor) into a run: idle baseline first, background
//! sampling, snapshots at the exact window bounds, then the `cpu`, `net`, `power`,
//! `efficiency` blocks and the environment manifest in the result document.

use std::path::Path;

use sanbench_doc::host::HostBlock;
use sanbench_engine::result::{Efficiency, RunDoc, TargetResult};
use sanbench_monitor::sampler::Baseline;
use sanbench_monitor::transport::InspectOptions;
use sanbench_monitor::{
    efficiency, manifest, Monitor, MonitorConfig, MonitorHandle, MonitorReport,
};

use crate::error::{usage, CliError};

/// A validated monitor configuration.
#[derive(Clone)]
pub struct MonitorSetup {
    pub cfg: MonitorConfig,
}

impl MonitorSetup {
    /// The monitor as the command line's defaults set it up, with a `baseline`-long idle
    /// baseline: power from the best source this host has, samples each second.
    pub fn auto(baseline: std::time::Duration) -> MonitorSetup {
        MonitorSetup {
            cfg: MonitorConfig {
                power: sanbench_monitor::PowerChoice::Auto,
                power_options: Some(sanbench_monitor::PowerOptions::for_host(Path::new("/"))),
                baseline,
                interval: std::time::Duration::from_secs(1),
                ..MonitorConfig::default()
            },
        }
    }
}

/// A monitor started for one run.
pub struct Running {
    pub handle: MonitorHandle,
    pub baseline: Option<Baseline>,
}

/// Opens the monitor, measures (or reuses) the idle baseline, starts sampling.
pub fn start(s: &MonitorSetup, reuse: Option<Baseline>) -> Result<Running, CliError> {
    let mut m = Monitor::new(s.cfg.clone()).map_err(|e| {
        if e.is_usage() {
            usage(e.to_string())
        } else {
            CliError::Failed(anyhow::anyhow!("host monitor: {e}"))
        }
    })?;
    let baseline = match reuse {
        Some(b) => {
            m.reuse_baseline(b);
            Some(b)
        }
        None if !s.cfg.baseline.is_zero() => Some(
            m.baseline()
                .map_err(|e| CliError::Failed(anyhow::anyhow!("idle baseline: {e}")))?,
        ),
        None => None,
    };
    let handle = m
        .start()
        .map_err(|e| CliError::Failed(anyhow::anyhow!("host monitor: {e}")))?;
    Ok(Running { handle, baseline })
}

fn eff(r: &TargetResult, report: &MonitorReport) -> Efficiency {
    efficiency(r.ios, r.bytes, r.seconds, report, r.pacing_cpu_s)
}

/// Adds the monitor's figures to the document. Host CPU and power are system-wide: with one
/// target they are that target's cost; with several at once only the aggregate (`all`) gets
/// efficiency figures, since the host cannot say which target spent which cycle.
pub fn fill(doc: &mut RunDoc, report: &MonitorReport, baseline: Option<Baseline>) {
    let cpu = Some(report.cpu.clone());
    let net = Some(report.net.clone());
    let power = Some(report.power.clone());
    let single = doc.results.len() == 1;
    for r in doc.results.iter_mut().chain(doc.all.iter_mut()) {
        r.cpu = cpu.clone();
        r.net = net.clone();
        r.power = power.clone();
    }
    if single {
        let e = eff(&doc.results[0], report);
        doc.results[0].efficiency = e;
    } else if let Some(all) = doc.all.as_mut() {
        all.efficiency = eff(all, report);
    }
    doc.host = Some(HostBlock {
        baseline,
        window_s: report.window_s,
        series: report.series.clone(),
    });
}

/// The environment manifest: host facts, plus each target's transport (block devices, from
/// sysfs) or the interface toward it (network targets). `placement`: the context's
/// (`Context::placement`).
pub fn manifest(doc: &mut RunDoc, placement: Option<serde_json::Value>) {
    let root = Path::new("/");
    let opts = InspectOptions::default();
    let mut m = manifest::collect(root, env!("CARGO_PKG_VERSION"), None, &opts);
    if let Some(p) = placement {
        m.extra.insert("placement".into(), p);
    }
    doc.manifest = Some(m);
    for r in doc.results.iter_mut() {
        let Some(info) = r.info.as_mut() else {
            continue;
        };
        let kind = info.params.get("kind").and_then(|v| v.as_str());
        // A passthrough target is labelled by the block device of the same namespace or
        // disk: the transport underneath is the same.
        let device = match kind {
            Some("block device") => info.params.get("path"),
            _ => info.params.get(crate::passthrough::BLOCK_DEVICE),
        };
        if kind == Some("block device") || device.is_some() {
            if let Some(path) = device.and_then(|v| v.as_str()) {
                let path = path.to_string();
                match sanbench_monitor::transport::inspect_device(root, Path::new(&path), &opts) {
                    Ok(d) => {
                        info.params.insert(
                            "transport".into(),
                            serde_json::to_value(d).unwrap_or_default(),
                        );
                    }
                    Err(e) => {
                        info.params.insert("transport_note".into(), e.note().into());
                    }
                }
            }
        } else if let Some(host) = network_host(&info.uri) {
            let iface = sanbench_monitor::transport::net_iface(root, &host, &opts);
            info.params.insert(
                "interface".into(),
                serde_json::to_value(iface).unwrap_or_default(),
            );
        }
    }
}

/// The host part of a network URI (`nbd://H:P/x`, `iscsi://u%s@H:P/iqn/0`), for route lookup.
fn network_host(uri: &str) -> Option<String> {
    let rest = uri.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let hostport = authority.rsplit('@').next()?;
    if hostport.is_empty() {
        return None;
    }
    let host = if let Some(h) = hostport.strip_prefix('[') {
        h.split(']').next()?.to_string()
    } else {
        hostport.split(':').next()?.to_string()
    };
    Some(host)
}

#[cfg(test)]
mod tests {
    use super::network_host;

    #[test]
    fn hosts() {
        assert_eq!(
            network_host("nbd://127.0.0.1:10809/x").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            network_host("iscsi://u%s@10.0.0.2:3260/iqn.x/1").as_deref(),
            Some("10.0.0.2")
        );
        assert_eq!(network_host("nbd://[::1]:10809").as_deref(), Some("::1"));
        assert_eq!(network_host("mem:1G"), None);
        assert_eq!(network_host("nbd+unix:///x?socket=/s"), None);
    }
}
