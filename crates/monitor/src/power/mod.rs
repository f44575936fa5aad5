//! Power and energy sources, their detection, and the energy integrator.
//!
//! A source reports either cumulative energy (RAPL counters) or instantaneous watts (BMC, wall
//! meter, command, model). [`PowerSampler`] turns either into energy over a window: counters are
//! differenced, watts are integrated with the trapezoid rule (docs/MEASURE.md, "Power": integrate
//! energy rather than average spot readings). A source that fails mid-run stops the series and
//! leaves a note; the figures it cannot support are `None`, never guessed.

mod ipmi;
mod model;
mod rapl;
mod sampler;
mod wattsup;

pub use ipmi::{default_ipmi_cmd, parse_dcmi, CommandSource, IpmiSource};
pub use model::{ModelParams, ModelSource};
pub use rapl::{wrap_delta, RaplSource, Zone};
pub use sampler::{Idle, PowerReport, PowerSampler};
pub use wattsup::{parse_record, WattsUpRecord, WattsUpSource, START_LOGGING};

use crate::error::{MonitorError, Result};
use crate::fsutil::under;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One reading of a source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reading {
    /// Energy in joules since some fixed origin, monotonic (wrap-around already undone).
    EnergyJ(f64),
    /// Instantaneous (or meter-averaged) power in watts.
    Watts(f64),
}

/// A power meter of any kind.
pub trait PowerSource: Send + std::fmt::Debug {
    /// Short stable name used in reports: `rapl`, `ipmi-dcmi`, `wattsup`, `command`, `model`.
    fn name(&self) -> &str;
    /// True when the figures are estimated, not measured.
    fn modeled(&self) -> bool {
        false
    }
    /// True when a read takes microseconds (a file, a buffered port), so the sampler may read it
    /// at the exact window bounds from the run loop's thread. Commands are not fast: their
    /// readings around a bound are interpolated instead.
    fn fast(&self) -> bool {
        false
    }
    fn read(&mut self) -> Result<Reading>;
}

/// Which source the user asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum PowerChoice {
    /// First measured source that works (RAPL, IPMI, the wall meter or command if given), else
    /// the model.
    #[default]
    Auto,
    /// No power figures at all.
    Off,
    Rapl,
    Ipmi,
    WattsUp(PathBuf),
    Command(String),
    Model(ModelParams),
}

/// Everything detection and opening need besides the root.
#[derive(Clone, Debug)]
pub struct PowerOptions {
    pub ipmi_cmd: Vec<String>,
    pub wattsup_device: Option<PathBuf>,
    pub power_cmd: Option<String>,
    pub model: ModelParams,
    /// How long to wait for the wall meter's first record.
    pub wattsup_wait: Duration,
}

impl PowerOptions {
    pub fn for_host(root: &Path) -> PowerOptions {
        PowerOptions {
            ipmi_cmd: default_ipmi_cmd(),
            wattsup_device: None,
            power_cmd: None,
            model: ModelParams::default_for_cpus(crate::manifest::cpu_count(root)),
            wattsup_wait: Duration::from_secs(3),
        }
    }
}

/// What `sanbench monitors` shows for each source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    pub name: String,
    pub available: bool,
    pub modeled: bool,
    /// Why not, or what was found (zones, first reading).
    pub detail: String,
}

fn ipmi_device_present(root: &Path) -> bool {
    ["/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0"]
        .iter()
        .any(|p| under(root, p).exists())
}

fn open_ipmi(root: &Path, opts: &PowerOptions) -> Result<IpmiSource> {
    // Only the default command needs the local device; a substituted command (a test script,
    // `ipmitool -I lanplus -H bmc ...`) is tried as given.
    if opts.ipmi_cmd == default_ipmi_cmd() && !ipmi_device_present(root) {
        return Err(MonitorError::Unavailable(
            "no /dev/ipmi0 (no BMC, or ipmi_si/ipmi_devintf not loaded)".into(),
        ));
    }
    IpmiSource::open(opts.ipmi_cmd.clone())
}

fn status_of(name: &str, modeled: bool, r: Result<String>) -> SourceStatus {
    match r {
        Ok(detail) => SourceStatus {
            name: name.into(),
            available: true,
            modeled,
            detail,
        },
        Err(e) => SourceStatus {
            name: name.into(),
            available: false,
            modeled,
            detail: e.note(),
        },
    }
}

/// Tries every source and says which work and why the others do not.
pub fn detect(root: &Path, opts: &PowerOptions) -> Vec<SourceStatus> {
    let mut v = vec![
        status_of("rapl", false, RaplSource::open(root).map(|s| s.describe())),
        status_of(
            "ipmi-dcmi",
            false,
            open_ipmi(root, opts).and_then(|mut s| reading_text(&mut s)),
        ),
    ];
    v.push(match &opts.wattsup_device {
        Some(p) => status_of(
            "wattsup",
            false,
            WattsUpSource::open(p, opts.wattsup_wait).and_then(|mut s| reading_text(&mut s)),
        ),
        None => status_of(
            "wattsup",
            false,
            Err(MonitorError::Unavailable(
                "no serial device given (--wattsup DEVICE)".into(),
            )),
        ),
    });
    v.push(match &opts.power_cmd {
        Some(c) => status_of(
            "command",
            false,
            CommandSource::open(c).and_then(|mut s| reading_text(&mut s)),
        ),
        None => status_of(
            "command",
            false,
            Err(MonitorError::Unavailable(
                "no command given (--power-cmd CMD)".into(),
            )),
        ),
    });
    v.push(status_of(
        "model",
        true,
        ModelSource::open(root, opts.model).map(|s| {
            let p = s.params();
            format!(
                "estimate: {:.0} W idle + ({:.0} − {:.0}) W × utilization",
                p.idle_w, p.max_w, p.idle_w
            )
        }),
    ));
    v
}

fn reading_text(s: &mut dyn PowerSource) -> Result<String> {
    Ok(match s.read()? {
        Reading::Watts(w) => format!("reading {w:.1} W"),
        Reading::EnergyJ(j) => format!("counter {j:.3} J"),
    })
}

/// An opened source (none for `Off`) and why better sources were passed over.
pub type Opened = (Option<Box<dyn PowerSource>>, Vec<String>);

/// Opens the chosen source. `Ok(None)` for [`PowerChoice::Off`]. For `Auto`, the errors of the
/// measured sources that were tried are returned alongside, for the report's note.
pub fn open(root: &Path, choice: &PowerChoice, opts: &PowerOptions) -> Result<Opened> {
    let boxed = |s: Box<dyn PowerSource>| Ok((Some(s), Vec::new()));
    match choice {
        PowerChoice::Off => Ok((None, Vec::new())),
        PowerChoice::Rapl => boxed(Box::new(RaplSource::open(root)?)),
        PowerChoice::Ipmi => boxed(Box::new(open_ipmi(root, opts)?)),
        PowerChoice::WattsUp(p) => boxed(Box::new(WattsUpSource::open(p, opts.wattsup_wait)?)),
        PowerChoice::Command(c) => boxed(Box::new(CommandSource::open(c)?)),
        PowerChoice::Model(p) => boxed(Box::new(ModelSource::open(root, *p)?)),
        PowerChoice::Auto => {
            let mut why = Vec::new();
            if let Some(p) = &opts.wattsup_device {
                match WattsUpSource::open(p, opts.wattsup_wait) {
                    Ok(s) => return Ok((Some(Box::new(s)), why)),
                    Err(e) => why.push(format!("wattsup: {}", e.note())),
                }
            }
            if let Some(c) = &opts.power_cmd {
                match CommandSource::open(c) {
                    Ok(s) => return Ok((Some(Box::new(s)), why)),
                    Err(e) => why.push(format!("command: {}", e.note())),
                }
            }
            match RaplSource::open(root) {
                Ok(s) => return Ok((Some(Box::new(s)), why)),
                Err(e) => why.push(format!("rapl: {}", e.note())),
            }
            match open_ipmi(root, opts) {
                Ok(s) => return Ok((Some(Box::new(s)), why)),
                Err(e) => why.push(format!("ipmi-dcmi: {}", e.note())),
            }
            let m = ModelSource::open(root, opts.model)?;
            Ok((Some(Box::new(m)), why))
        }
    }
}
