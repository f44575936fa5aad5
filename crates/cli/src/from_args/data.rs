//! The data and monitor flags (shared by `run` and `compare`) as typed plans.

use std::path::Path;
use std::time::Duration;

use sanbench_engine::precondition::Mode;
use sanbench_engine::stamp::DataSpec;
use sanbench_monitor::power::ModelParams;
use sanbench_monitor::{MonitorConfig, PowerChoice, PowerOptions};

use crate::args::{DataArgs, MonitorArgs};
use sanbench_session::error::{usage, CliError};
use sanbench_session::monitoring::MonitorSetup;
use sanbench_session::precondition::DataPlan;

/// The data flags, parsed once.
pub fn data_plan(a: &DataArgs) -> Result<DataPlan, CliError> {
    let mode: Mode = a
        .precondition
        .parse()
        .map_err(|e| usage(format!("--precondition: {e}")))?;
    let spec = DataSpec {
        dedupe_pct: a.dedupe.0,
        compress_pct: a.compress.0,
    };
    spec.validate().map_err(usage)?;
    if a.verify && a.dedupe.0 > 0.0 {
        return Err(usage(
            "--verify cannot check --dedupe data (duplicate units carry no stamp); drop one",
        ));
    }
    Ok(DataPlan {
        mode,
        spec,
        verify: a.verify || a.verify_state.is_some(),
        state: a.verify_state.clone(),
    })
}

/// The monitor flags: `None` with `--no-monitor`.
pub fn monitor(a: &MonitorArgs) -> Result<Option<MonitorSetup>, CliError> {
    if a.no_monitor {
        return Ok(None);
    }
    let root = Path::new("/");
    let mut opts = PowerOptions::for_host(root);
    opts.power_cmd = a.power_cmd.clone();
    opts.wattsup_device = a.wattsup.clone();
    if a.idle_watts.is_some() || a.max_watts.is_some() {
        let d = opts.model;
        opts.model = ModelParams {
            idle_w: a.idle_watts.unwrap_or(d.idle_w),
            max_w: a.max_watts.unwrap_or(d.max_w),
        };
        if opts.model.max_w < opts.model.idle_w {
            return Err(usage("--max-watts must be at least --idle-watts"));
        }
    }
    let power = match a.power.as_str() {
        "auto" => match (&a.wattsup, &a.power_cmd) {
            (Some(dev), _) => PowerChoice::WattsUp(dev.clone()),
            (None, Some(cmd)) => PowerChoice::Command(cmd.clone()),
            _ => PowerChoice::Auto,
        },
        "off" => PowerChoice::Off,
        "rapl" => PowerChoice::Rapl,
        "ipmi" => PowerChoice::Ipmi,
        "model" => PowerChoice::Model(opts.model),
        "wattsup" => PowerChoice::WattsUp(
            a.wattsup
                .clone()
                .ok_or_else(|| usage("--power wattsup needs --wattsup DEVICE"))?,
        ),
        "cmd" => PowerChoice::Command(
            a.power_cmd
                .clone()
                .ok_or_else(|| usage("--power cmd needs --power-cmd COMMAND"))?,
        ),
        other => {
            return Err(usage(format!(
                "unknown power source '{other}' (use auto, off, rapl, ipmi, wattsup, cmd, model)"
            )))
        }
    };
    let (baseline, interval) = (a.baseline.0, a.monitor_interval.0);
    if interval < Duration::from_millis(10) {
        return Err(usage("--monitor-interval must be at least 10ms"));
    }
    Ok(Some(MonitorSetup {
        cfg: MonitorConfig {
            watch: a.watch.clone(),
            power,
            power_options: Some(opts),
            baseline,
            interval,
            ..MonitorConfig::default()
        },
    }))
}
