//! results.csv: one row per cell (workload × target × repetition) with the key figures, for
//! spreadsheets and scripts. Empty fields mean "not measured".
//!
//! Columns ([`CSV_HEADER`]):
//! `workload, group, target, repeat` identify the cell; `seconds` is the measured window;
//! `iops, mb_per_s` (decimal MB), `mib_per_s`; `read_iops, write_iops`;
//! `lat_mean_us, lat_p50_us, lat_p90_us, lat_p99_us, lat_p999_us, lat_max_us` (reads and writes
//! together); `lat_0_1ms_pct, lat_0_2ms_pct` (cumulative share within 1 and 2 ms, the Demartek
//! figures); `iops_per_cpu_pct, mb_per_s_per_cpu_pct, cpu_us_per_io, core_pct_per_1000_iops`;
//! `iops_per_watt, mb_per_s_per_watt`; `power_modeled` (true when the watts are modeled, not
//! measured); `steady` (the time-based steady-state verdict, empty when not judged);
//! `host_not_idle` (true when the idle baseline showed a busy host: the CPU and power figures
//! above idle are not this run's alone).

use super::Exporter;
use crate::analysis::power_is_modeled;
use crate::{Report, ReportError};

pub const CSV_HEADER: &str = "workload,group,target,repeat,seconds,iops,mb_per_s,mib_per_s,\
read_iops,write_iops,lat_mean_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,\
lat_0_1ms_pct,lat_0_2ms_pct,iops_per_cpu_pct,mb_per_s_per_cpu_pct,cpu_us_per_io,\
core_pct_per_1000_iops,iops_per_watt,mb_per_s_per_watt,power_modeled,steady,host_not_idle";

pub struct CsvExporter;

/// A number as CSV: shortest exact form, empty when absent or not finite.
fn f(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

impl Exporter for CsvExporter {
    fn file_name(&self) -> &'static str {
        "results.csv"
    }

    fn render(&self, r: &Report) -> Result<Vec<u8>, ReportError> {
        // The csv crate quotes a field only where RFC 4180 needs it, ends records with "\n".
        let mut w = csv::Writer::from_writer(Vec::new());
        let csv_err = |e: csv::Error| ReportError::Csv(e.to_string());
        w.write_record(CSV_HEADER.split(',')).map_err(csv_err)?;
        for c in &r.cmp.cells {
            let group = r
                .cmp
                .workloads
                .iter()
                .find(|w| w.id == c.workload)
                .map(|w| w.group.as_str())
                .unwrap_or("");
            let t = &c.result;
            let l = &t.latency_us;
            let b = &t.latency_ms_buckets;
            let cum = |n: usize| (!b.is_empty()).then(|| b.iter().take(n).sum::<f64>() * 100.0);
            let e = &t.efficiency;
            let cols = [
                c.workload.clone(),
                group.to_string(),
                c.target.clone(),
                c.repeat.to_string(),
                f(Some(t.seconds)),
                f(Some(t.iops)),
                f(Some(t.mb_per_s)),
                f(Some(t.mib_per_s)),
                f(Some(t.read.iops)),
                f(Some(t.write.iops)),
                f(Some(l.mean)),
                f(Some(l.p50)),
                f(Some(l.p90)),
                f(Some(l.p99)),
                f(Some(l.p999)),
                f(Some(l.max)),
                f(cum(1)),
                f(cum(2)),
                f(e.iops_per_cpu_pct),
                f(e.mb_per_s_per_cpu_pct),
                f(e.cpu_us_per_io),
                f(e.core_pct_per_1000_iops),
                f(e.iops_per_watt),
                f(e.mb_per_s_per_watt),
                if t.power.is_some() {
                    power_is_modeled(t).to_string()
                } else {
                    String::new()
                },
                c.steady.map(|s| s.steady.to_string()).unwrap_or_default(),
                e.host_not_idle.to_string(),
            ];
            w.write_record(&cols).map_err(csv_err)?;
        }
        w.into_inner().map_err(|e| ReportError::Csv(e.to_string()))
    }
}
