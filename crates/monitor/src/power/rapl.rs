//! RAPL energy counters through powercap (`/sys/class/powercap/intel-rapl:N[:M]`).
//!
//! Each zone has `name` (package-N, package-N-die-M, core, uncore, dram, psys), `energy_uj`
//! (µJ, wraps at `max_energy_range_uj`) and is root-only to read since Linux 5.10.
//!
//! What the total counts, so that nothing is counted twice:
//! * `core` and `uncore` are parts of their package: never added.
//! * `dram` is metered apart from the package (RAPL's PKG domain excludes DRAM even though
//!   powercap lists it as a subzone): added to the packages.
//! * `psys` (platform) covers the whole SoC including packages and DRAM: when present, the total
//!   is the sum of psys zones alone.
//!
//! Zones under `intel-rapl-mmio:*` duplicate the MSR package zone and are ignored. The counter is
//! read at every sample; sampling at 1 s is far below the wrap period (minutes at server power).

use super::{PowerSource, Reading};
use crate::error::{MonitorError, Result};
use crate::fsutil::{read_attr_err, read_u64, under};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Zone {
    pub path: PathBuf,
    pub name: String,
    /// `None` when `max_energy_range_uj` is unreadable: a wrap can then not be undone.
    pub max_uj: Option<u64>,
    pub counted: bool,
    prev_uj: Option<u64>,
    /// Unwrapped energy since the first reading, µJ.
    acc_uj: u128,
}

/// Δ of a wrapping counter: `cur − prev` if `cur ≥ prev`, else `(max − prev) + cur`.
pub fn wrap_delta(prev: u64, cur: u64, max: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else {
        max.saturating_sub(prev) + cur
    }
}

#[derive(Debug)]
pub struct RaplSource {
    zones: Vec<Zone>,
}

impl RaplSource {
    /// Finds the zones under `ROOT/sys/class/powercap` and checks that the counted ones read.
    pub fn open(root: &Path) -> Result<RaplSource> {
        let dir = under(root, "/sys/class/powercap");
        let rd = std::fs::read_dir(&dir).map_err(|_| {
            MonitorError::Unavailable(format!(
                "no {} (no RAPL: not an Intel/AMD host, a VM, or intel_rapl not loaded)",
                dir.display()
            ))
        })?;
        let mut zones = Vec::new();
        for e in rd.flatten() {
            let fname = e.file_name();
            let Some(n) = fname.to_str() else { continue };
            if !n.starts_with("intel-rapl:") {
                continue;
            }
            let path = dir.join(n);
            let name = read_attr_err(&path.join("name"))?;
            let max_uj = read_u64(&path.join("max_energy_range_uj")).ok();
            zones.push(Zone {
                path,
                name,
                max_uj,
                counted: false,
                prev_uj: None,
                acc_uj: 0,
            });
        }
        if zones.is_empty() {
            return Err(MonitorError::Unavailable(format!(
                "{} has no intel-rapl zones",
                dir.display()
            )));
        }
        zones.sort_by(|a, b| a.path.cmp(&b.path));
        let has_psys = zones.iter().any(|z| z.name == "psys");
        for z in &mut zones {
            z.counted = if has_psys {
                z.name == "psys"
            } else {
                z.name.starts_with("package") || z.name == "dram"
            };
        }
        let mut src = RaplSource { zones };
        // Fail now (with the permission hint) rather than at the first sample.
        src.read()?;
        Ok(src)
    }

    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// One line per zone, for `sanbench monitors`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .zones
            .iter()
            .map(|z| {
                let id = z.path.file_name().and_then(|s| s.to_str()).unwrap_or("?");
                format!(
                    "{id}={}{}",
                    z.name,
                    if z.counted { "" } else { " (not in total)" }
                )
            })
            .collect();
        parts.join(", ")
    }
}

impl PowerSource for RaplSource {
    fn name(&self) -> &str {
        "rapl"
    }

    fn fast(&self) -> bool {
        true
    }

    /// Cumulative joules of the counted zones since the first read.
    fn read(&mut self) -> Result<Reading> {
        let mut total: u128 = 0;
        for z in &mut self.zones {
            if !z.counted {
                continue;
            }
            let cur = read_u64(&z.path.join("energy_uj"))?;
            if let Some(prev) = z.prev_uj {
                let d = match z.max_uj {
                    Some(max) => wrap_delta(prev, cur, max),
                    None if cur >= prev => cur - prev,
                    None => {
                        return Err(MonitorError::parse(
                            z.path.join("energy_uj"),
                            "counter went backwards and max_energy_range_uj is unreadable",
                        ))
                    }
                };
                z.acc_uj += d as u128;
            }
            z.prev_uj = Some(cur);
            total += z.acc_uj;
        }
        Ok(Reading::EnergyJ(total as f64 / 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn zone(root: &Path, id: &str, name: &str, e: u64, max: u64) {
        let d = root.join("sys/class/powercap").join(id);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("name"), format!("{name}\n")).unwrap();
        fs::write(d.join("energy_uj"), format!("{e}\n")).unwrap();
        fs::write(d.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
    }

    fn set(root: &Path, id: &str, e: u64) {
        let p = root.join("sys/class/powercap").join(id).join("energy_uj");
        fs::write(p, format!("{e}\n")).unwrap();
    }

    #[test]
    fn wrap() {
        assert_eq!(wrap_delta(100, 250, 1000), 150);
        assert_eq!(wrap_delta(900, 50, 1000), 150);
        assert_eq!(wrap_delta(5, 5, 1000), 0);
    }

    #[test]
    fn packages_and_dram_counted_core_not_and_counter_wraps() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        zone(r, "intel-rapl:0", "package-0", 999_000_000, 1_000_000_000);
        zone(r, "intel-rapl:0:0", "core", 5, 1_000_000_000);
        zone(r, "intel-rapl:0:1", "dram", 10_000_000, 1_000_000_000);
        zone(r, "intel-rapl:1", "package-1", 0, 1_000_000_000);
        zone(r, "intel-rapl-mmio:0", "package-0", 0, 1_000_000_000);
        let mut s = RaplSource::open(r).unwrap();
        assert_eq!(s.zones().len(), 4);
        assert!(s.describe().contains("intel-rapl:0:0=core (not in total)"));
        // package-0 wraps: 999 J → 4 J with max 1000 J = 5 J; dram +2 J; package-1 +3 J;
        // core +100 J is ignored.
        set(r, "intel-rapl:0", 4_000_000);
        set(r, "intel-rapl:0:0", 100_000_005);
        set(r, "intel-rapl:0:1", 12_000_000);
        set(r, "intel-rapl:1", 3_000_000);
        match s.read().unwrap() {
            Reading::EnergyJ(j) => assert!((j - 10.0).abs() < 1e-9, "{j}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn psys_alone_when_present() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        zone(r, "intel-rapl:0", "package-0", 0, 1 << 32);
        zone(r, "intel-rapl:1", "psys", 0, 1 << 32);
        let mut s = RaplSource::open(r).unwrap();
        set(r, "intel-rapl:0", 7_000_000);
        set(r, "intel-rapl:1", 20_000_000);
        assert_eq!(s.read().unwrap(), Reading::EnergyJ(20.0));
    }

    #[test]
    fn absent_or_broken() {
        let t = tempfile::tempdir().unwrap();
        let e = RaplSource::open(t.path()).unwrap_err();
        assert!(e.note().contains("no RAPL"), "{}", e.note());
        // energy_uj that is not a number: a parse error naming the file, no figure.
        zone(t.path(), "intel-rapl:0", "package-0", 0, 10);
        fs::write(
            t.path().join("sys/class/powercap/intel-rapl:0/energy_uj"),
            "garbage",
        )
        .unwrap();
        let e = RaplSource::open(t.path()).unwrap_err();
        assert!(e.to_string().contains("energy_uj"), "{e}");
    }

    #[test]
    fn permission_note() {
        let e = MonitorError::read(
            Path::new("/sys/class/powercap/intel-rapl:0/energy_uj"),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert!(e.note().contains("root only since Linux 5.10"));
    }
}
