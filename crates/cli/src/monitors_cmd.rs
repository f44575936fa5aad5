//! `sanbench monitors`: what this host can measure, and why not where it cannot.

use std::path::Path;

use sanbench_monitor::transport::{self, InspectOptions};
use sanbench_monitor::{detect, manifest, PowerOptions};

use crate::args::MonitorsArgs;
use sanbench_session::error::CliError;

pub fn run(args: MonitorsArgs) -> Result<(), CliError> {
    let a = args.monitor;
    let root = Path::new("/");
    let setup = crate::from_args::data::monitor(&a)?;
    let opts = setup
        .as_ref()
        .and_then(|s| s.cfg.power_options.clone())
        .unwrap_or_else(|| PowerOptions::for_host(root));
    let m = manifest::collect(
        root,
        env!("CARGO_PKG_VERSION"),
        None,
        &InspectOptions::default(),
    );
    outln!(
        "host: {} ({} CPUs, {}), kernel {}, governor {}",
        m.hostname.as_deref().unwrap_or("?"),
        m.cpu_count,
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.kernel.as_deref().unwrap_or("?"),
        m.governor.as_deref().unwrap_or("none (no cpufreq)")
    );
    outln!(
        "cpu: /proc/stat per core and in all (busy: the window less idle, not the busy ticks); \
         per process and thread from /proc/PID/task"
    );
    outln!("network: /proc/net/dev per interface");
    outln!("power sources (first available measured source wins; the model only where none):");
    for s in detect(root, &opts) {
        outln!(
            "  {:<10} {:<13} {}",
            s.name,
            match (s.available, s.modeled) {
                (true, true) => "available*",
                (true, false) => "available",
                (false, _) => "unavailable",
            },
            s.detail
        );
    }
    outln!("  * modeled: every figure from it is labeled modeled in every output");
    // Each device as `run` records it in the manifest: the label, then the transport's fields.
    let mut bad = None;
    for d in &args.devices {
        match transport::inspect_device(root, d, &InspectOptions::default()) {
            Ok(info) => {
                let t = serde_json::to_string(&info.transport).unwrap_or_default();
                let net = info
                    .net
                    .as_ref()
                    .map(|n| format!(" via {} (MTU {})", n.name, n.mtu.unwrap_or(0)))
                    .unwrap_or_default();
                outln!("device {}: {}{net} {t}", d.display(), info.label);
            }
            Err(e) => {
                outln!("device {}: {e}", d.display());
                bad = Some(e);
            }
        }
    }
    if let Some(e) = bad {
        return Err(CliError::Usage(e.to_string()));
    }
    Ok(())
}
