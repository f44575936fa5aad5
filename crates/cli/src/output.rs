//! The summary printed after a run (its table: run_table.rs) and the comparison's table.

use std::fmt::Write;

use sanbench_doc::compare::LinkInfo;
use sanbench_engine::result::{RunDoc, TargetResult};
use sanbench_store::Comparison;
use sanbench_units::fmt::si;
use sanbench_units::fmt::us_column as lat;

use crate::run_table::{figs, table, target_row, Row};

/// The per-host breakdown of a run of several MPI ranks (the rows above are all ranks merged).
fn hosts(out: &mut String, doc: &RunDoc) {
    if doc.hosts.len() < 2 {
        return;
    }
    if let Some(m) = &doc.mpi {
        let _ = writeln!(
            out,
            "{} ranks ({}): barrier exits within {:.0} µs, windows within {:.0} µs; per rank:",
            m.ranks, m.launcher, m.barrier_exit_spread_us, m.window_spread_us
        );
    }
    for h in &doc.hosts {
        let cpu = h
            .cpu
            .as_ref()
            .map(|c| format!("host CPU {:.1} % busy", c.busy_pct))
            .unwrap_or_default();
        let name = format!("  rank {} {}", h.rank, h.host);
        let name = if name.len() > 28 {
            format!("{}…", &name[..27])
        } else {
            name
        };
        if h.monitor_only {
            let _ = writeln!(out, "{name:<28} monitor only {cpu}");
            continue;
        }
        let l = &h.latency_us;
        let _ = writeln!(
            out,
            "{name:<28} {:>9} {:>9.1} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {cpu}",
            si(h.iops),
            h.mb_per_s,
            "",
            lat(l.mean),
            lat(l.p50),
            lat(l.p99),
            lat(l.p999),
            lat(l.max),
        );
    }
}

/// The summary printed after a run, its table fitted to `width` columns.
pub fn summary(doc: &RunDoc, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sanbench {}: {} | {:.1} s measured{}",
        doc.sanbench_version,
        doc.spec_description,
        doc.seconds,
        if doc.stopped_early {
            " (stopped early)"
        } else {
            ""
        }
    );
    let mut rows = Vec::new();
    for r in &doc.results {
        rows.push(target_row(&r.target, r));
        let flush = r.flush.clone().unwrap_or_default();
        let fua = r.fua.clone().unwrap_or_default();
        let trim = r.trim.clone().unwrap_or_default();
        let zeroes = r.write_zeroes.clone().unwrap_or_default();
        // Trims' and write-zeroes' MB/s are bytes discarded or zeroed, not moved: apart from
        // the target's row above, which counts reads and writes only.
        for (dir, d) in [
            ("  read", &r.read),
            ("  write", &r.write),
            ("  write (FUA)", &fua),
            ("  flush", &flush),
            ("  trim (discarded)", &trim),
            ("  write-zeroes (zeroed)", &zeroes),
        ] {
            if d.ios > 0 && (d.ios != r.ios || (dir != "  read" && dir != "  write")) {
                rows.push(Row {
                    name: dir.into(),
                    figs: figs(d.iops, d.mb_per_s, d.mib_per_s, &d.latency_us),
                    limit: String::new(),
                });
            }
        }
    }
    if let Some(all) = &doc.all {
        rows.push(target_row("all", all));
    }
    out.push_str(&table(&rows, width));
    for r in &doc.results {
        if let Some(a) = &r.allocation_after {
            let _ = writeln!(
                out,
                "after the window, {} reports {} of {} bytes unwritten ({})",
                r.target, a.unwritten_bytes, a.checked_bytes, a.method
            );
        }
    }
    hosts(&mut out, doc);
    for r in &doc.results {
        if let (Some(o), Some(sv), Some(lag)) = (&r.open_loop, &r.service_us, &r.issue_lag_us) {
            let _ = writeln!(
                out,
                "open loop on {}: asked {} IOPS ({} arrivals), achieved {}; latency above is \
                 response time from the intended issue time; service mean {} p99 {} µs, \
                 issue lag p99 {} µs; {}",
                r.target,
                si(o.asked_iops),
                o.arrival,
                si(o.achieved_iops),
                lat(sv.mean),
                lat(sv.p99),
                lat(lag.p99),
                if o.valid {
                    "valid".to_string()
                } else {
                    format!("INVALID: {}", o.invalid.join("; "))
                }
            );
        }
        if let Some(p) = &r.precondition {
            let _ = writeln!(out, "span of {}: {}", r.target, p.note);
        }
        out.push_str(&bottleneck_lines(&r.target, r));
        out.push_str(&crate::disruption_out::lines(r));
    }
    if let Some(all) = doc.all.as_ref().filter(|_| doc.results.len() > 1) {
        out.push_str(&bottleneck_lines("all", all));
    }
    if doc.results.iter().any(|r| r.write.ios > 0) {
        let _ = writeln!(out, "written data: {}", doc.data.describe());
    }
    if !doc.faults.is_empty() {
        let _ = writeln!(
            out,
            "faults (ms after the window started): {}",
            faults(&doc.faults)
        );
    }
    if let Some(p) = &doc.process_cpu {
        let _ = writeln!(
            out,
            "sanbench process: {:.2} s user + {:.2} s system CPU, {:.2} CPU-µs per I/O; peak RSS {:.1} MiB",
            p.user_s,
            p.system_s,
            p.cpu_us_per_io,
            doc.peak_rss_bytes as f64 / (1u64 << 20) as f64
        );
    }
    out.push_str(&host_lines(doc));
    let _ = writeln!(
        out,
        "MB/s = 10^6 B/s, MiB/s = 2^20 B/s; latency in µs from submission; Little = |IOPS × mean latency − L| / L, L the sampled mean of I/Os in flight; limit = what limited the window (docs/MEASURE.md, Bottleneck)"
    );
    out
}

/// `+1000 b down; +2500 b up; +3000 a loss=5% FAILED: why`
pub fn faults(f: &[sanbench_engine::result::FaultRecord]) -> String {
    f.iter()
        .map(|r| {
            let mut s = format!("+{:.0} {} {}", r.offset_ms, r.link, r.action);
            if let Some(e) = &r.error {
                s.push_str(&format!(" FAILED: {e}"));
            }
            s
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// "limited by (T): initiator-cpu: thread sb-w0-t0 at 99 % of a core" and the headroom of
/// the rest on the next line.
fn bottleneck_lines(name: &str, r: &TargetResult) -> String {
    let Some(b) = &r.bottleneck else {
        return String::new();
    };
    let mut out = format!("limited by ({name}): {}", b.text);
    if !b.also.is_empty() {
        let also: Vec<&str> = b.also.iter().map(|v| v.as_str()).collect();
        out.push_str(&format!("; also saturated: {}", also.join(", ")));
    }
    out.push('\n');
    let rest = b.headroom_text();
    if !rest.is_empty() {
        out.push_str(&format!("  headroom: {rest}\n"));
    }
    for n in &b.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    out
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// Host CPU, power and efficiency, from the monitor blocks.
fn host_lines(doc: &RunDoc) -> String {
    let mut out = String::new();
    let r = match (&doc.all, doc.results.len()) {
        (Some(all), _) => all,
        (None, 1) => &doc.results[0],
        _ => return out,
    };
    let Some(cpu) = &r.cpu else { return out };
    let e = &r.efficiency;
    let busy = Some(cpu.busy_pct);
    let idle = cpu.baseline_busy_pct;
    let _ = writeln!(
        out,
        "host CPU: {}% busy of {} cores (idle baseline {}%); {} CPU-µs per I/O; {}% of a core per 1000 IOPS; {} IOPS per CPU %, {} MB/s per CPU %",
        opt(busy, 1),
        cpu.cores,
        opt(idle, 1),
        opt(e.cpu_us_per_io, 2),
        opt(e.core_pct_per_1000_iops, 2),
        opt(e.iops_per_cpu_pct, 0),
        opt(e.mb_per_s_per_cpu_pct, 1),
    );
    if let Some(p) = e.pacing_cpu_pct.filter(|p| *p > 0.0) {
        let _ = writeln!(
            out,
            "  of which the open loop's pacing (its streams spinning for their next arrival): \
             {p:.1}% of all cores, left out of the figures per I/O and per CPU % (docs/MEASURE.md)"
        );
    }
    if e.host_not_idle {
        let _ = writeln!(
            out,
            "warning: the host was {}% busy before the run (idle baseline): CPU and power figures \
             above idle cannot be told apart from that other load; re-run on a quiet host \
             (cpu_us_per_io_gross in --json counts everything)",
            opt(idle, 1)
        );
    }
    if let Some(o) = cpu.others.as_ref().filter(|o| o.notable()) {
        let _ = writeln!(
            out,
            "warning: other processes used {:.0}% of a core during the window ({}): their load \
             is in these figures; if one of them serves the target, --watch it, otherwise \
             re-run on a quiet host",
            o.pct_of_core,
            o.names()
        );
    }
    let parts: Vec<String> = cpu
        .groups
        .iter()
        .filter(|g| g.cpu_s > 0.0)
        .map(|g| format!("{} {:.0}% of a core", g.name, g.pct_of_core))
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(out, "  by process group: {}", parts.join(", "));
    }
    if let Some(p) = &r.power {
        let src = if p.source.is_empty() {
            "none"
        } else {
            p.source.as_str()
        };
        if src != "none" {
            let _ = writeln!(
                out,
                "power ({src}{}): {} W average, {} W idle; {} IOPS per W, {} MB/s per W above idle",
                if e.power_modeled { ", MODELED" } else { "" },
                opt(p.avg_w, 1),
                opt(p.idle_w, 1),
                opt(e.iops_per_watt, 0),
                opt(e.mb_per_s_per_watt, 2),
            );
        } else if let Some(n) = &p.note {
            let _ = writeln!(out, "power: none ({n})");
        }
    }
    out
}

/// Mean IOPS, MB/s, mean latency and limit of one workload on one target, over its rounds.
fn cell_figures(c: &Comparison, workload: &str, target: &str) -> Option<[String; 4]> {
    let cells: Vec<&TargetResult> = c.cells_of(workload, target).map(|x| &x.result).collect();
    if cells.is_empty() {
        return None;
    }
    let n = cells.len() as f64;
    let iops = cells.iter().map(|r| r.iops).sum::<f64>() / n;
    let mbps = cells.iter().map(|r| r.mb_per_s).sum::<f64>() / n;
    let lat = cells.iter().map(|r| r.latency_us.mean).sum::<f64>() / n;
    let limit = sanbench_report::headroom::limit_of(cells.iter().copied())
        .map_or_else(|| "-".to_string(), |l| l.short_text());
    Some([si(iops), format!("{mbps:.1}"), format!("{lat:.1}"), limit])
}

/// The comparison's table, fitted to `width` columns: workloads down and targets across
/// when every target fits side by side; otherwise one row per workload and target (the
/// table transposed), which fits any number of targets.
pub fn compare_table(c: &Comparison, width: usize) -> String {
    const FIG: usize = 36; // IOPS 8, MB/s 8, mean 8, limit 9 and the spaces between
    let mut out = String::new();
    let title = format!("{} — {}", c.suite, c.suite_description);
    let _ = writeln!(
        out,
        "\n{}",
        sanbench_session::fit::wrap(&title, width, "", "  ")
    );
    let wl = c
        .workloads
        .iter()
        .map(|w| w.id.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 30);
    let tn = c
        .targets
        .iter()
        .map(|t| t.name.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 34);
    let wide = wl + c.targets.len() * (FIG + 3) <= width
        && c.targets.iter().all(|t| t.name.chars().count() <= FIG);
    let figs = |f: &[String; 4]| format!("{:>8} {:>8} {:>8} {:<9}", f[0], f[1], f[2], f[3]);
    let head = format!(
        "{:>8} {:>8} {:>8} {:<9}",
        "IOPS", "MB/s", "mean µs", "limit"
    );
    if wide {
        let mut line = format!("{:<wl$}", "workload");
        for t in &c.targets {
            let _ = write!(line, " | {:^FIG$}", t.name);
        }
        let _ = writeln!(out, "{}", line.trim_end());
        let mut sub = format!("{:<wl$}", "");
        for _ in &c.targets {
            let _ = write!(sub, " | {head}");
        }
        let _ = writeln!(out, "{}", sub.trim_end());
        for w in &c.workloads {
            let id: String = w.id.chars().take(wl).collect();
            let mut line = format!("{id:<wl$}");
            for t in &c.targets {
                match cell_figures(c, &w.id, &t.name) {
                    Some(f) => {
                        let _ = write!(line, " | {}", figs(&f));
                    }
                    None => {
                        let _ = write!(line, " | {:^FIG$}", "-");
                    }
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    } else {
        let _ = writeln!(out, "{:<wl$}  {:<tn$} {head}", "workload", "target");
        for w in &c.workloads {
            let id: String = w.id.chars().take(wl).collect();
            for (i, t) in c.targets.iter().enumerate() {
                let name: String = t.name.chars().take(tn).collect();
                let shown = if i == 0 { id.as_str() } else { "" };
                let f = cell_figures(c, &w.id, &t.name)
                    .map_or_else(|| format!("{:>8}", "-"), |f| figs(&f));
                let _ = writeln!(
                    out,
                    "{}",
                    format!("{shown:<wl$}  {name:<tn$} {f}").trim_end()
                );
            }
        }
    }
    if c.cells.iter().any(|x| x.result.bottleneck.is_some()) {
        let legend = "limit: what limited the cells (most rounds; * not every round agreed): \
                      init-cpu, host-cpu (the initiator host's CPU) and queue (the generator) \
                      are not about the interconnect; link, tgt-cpu, device, latency (the round \
                      trip) are";
        let _ = writeln!(
            out,
            "{}",
            sanbench_session::fit::wrap(legend, width, "", "  ")
        );
    }
    for t in &c.targets {
        if let Some(l) = &t.link {
            let line = format!("{} behind lab link {}", t.name, link_text(l));
            let _ = writeln!(
                out,
                "{}",
                sanbench_session::fit::wrap(&line, width, "", "  ")
            );
        }
    }
    out
}

/// A lab link as one phrase: "one: 1 Gbit/s, MTU 1500, offloads on, direct".
pub fn link_text(l: &LinkInfo) -> String {
    let rate = sanbench_units::fmt::bit_rate(l.rate_bits as f64);
    format!(
        "{}: {rate}, MTU {}, offloads {}, {}",
        l.name,
        l.mtu,
        if l.offload { "on" } else { "off" },
        if l.switched { "switched" } else { "direct" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_links_in_one_phrase() {
        let link = |name: &str, rate_bits: u64, mtu: u32, offload: bool, switched: bool| LinkInfo {
            name: name.into(),
            rate_bits,
            mtu,
            offload,
            switched,
        };
        let l = link("one", 1_000_000_000, 9000, false, true);
        assert_eq!(
            link_text(&l),
            "one: 1 Gbit/s, MTU 9000, offloads off, switched"
        );
        let l = link("s", 100_000_000, 1500, true, false);
        assert_eq!(
            link_text(&l),
            "s: 100 Mbit/s, MTU 1500, offloads on, direct"
        );
    }
}
