//! The environment manifest every result carries (docs/MEASURE.md, "Repeatability"): sanbench
//! version, kernel, CPU model and count, frequency governor, memory, hostname, start time, and
//! the target device's transport.
//!
//! Everything is read under the root so fixture trees can stand in for a host. Missing facts are
//! `null`, not guesses: a VM without cpufreq has no governor.

use crate::fsutil::{read_attr, under};
use crate::transport::{inspect_device, InspectOptions};
use std::path::Path;
use std::time::SystemTime;

pub use crate::transport::InspectOptions as ManifestOptions;
pub use sanbench_doc::manifest::Manifest;

/// Collects the manifest. `device` is the target block device, if the run has one.
pub fn collect(
    root: &Path,
    sanbench_version: &str,
    device: Option<&Path>,
    opts: &InspectOptions,
) -> Manifest {
    let mut notes = Vec::new();
    let cpuinfo = std::fs::read_to_string(under(root, "/proc/cpuinfo")).unwrap_or_default();
    let device = device.and_then(|d| {
        inspect_device(root, d, opts)
            .map_err(|e| notes.push(e.note()))
            .ok()
    });
    Manifest {
        sanbench_version: sanbench_version.to_string(),
        kernel: read_attr(&under(root, "/proc/sys/kernel/osrelease"))
            .or_else(|| (root == Path::new("/")).then(uname_release).flatten()),
        cpu_model: cpu_model(&cpuinfo),
        cpu_count: cpu_count(root),
        governor: read_attr(&under(
            root,
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        )),
        mem_total_bytes: std::fs::read_to_string(under(root, "/proc/meminfo"))
            .ok()
            .and_then(|m| mem_total(&m)),
        hostname: read_attr(&under(root, "/proc/sys/kernel/hostname")),
        start_time: rfc3339(SystemTime::now()),
        device,
        notes,
        ..Manifest::default()
    }
}

fn uname_release() -> Option<String> {
    // SAFETY: utsname is plain old data; zeroed is valid and uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8(bytes).ok()
}

/// The CPU model: x86 `model name`, else the ARM/POWER/RISC-V equivalents.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    for key in [
        "model name",
        "Model",
        "cpu model",
        "cpu",
        "uarch",
        "Processor",
    ] {
        let v = cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        });
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            return Some(v);
        }
    }
    None
}

/// Online CPUs: `processor` lines of `/proc/cpuinfo`, else `cpuN` lines of `/proc/stat`, else 1.
pub fn cpu_count(root: &Path) -> usize {
    let info = std::fs::read_to_string(under(root, "/proc/cpuinfo")).unwrap_or_default();
    let n = info
        .lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count();
    if n > 0 {
        return n;
    }
    let stat = std::fs::read_to_string(under(root, "/proc/stat")).unwrap_or_default();
    stat.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count()
        .max(1)
}

/// `MemTotal:  16318480 kB` → bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let l = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = l.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// UTC in whole seconds: `2026-11-22T09:14:23Z`.
pub use sanbench_stats::time::rfc3339_secs as rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_and_meminfo() {
        let ci = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(ci).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        assert_eq!(
            mem_total("MemTotal:       16318480 kB\nMemFree: 1 kB\n"),
            Some(16_710_123_520)
        );
    }

    #[test]
    fn real_host_manifest() {
        let m = collect(Path::new("/"), "0.1.0", None, &InspectOptions::default());
        assert!(m.kernel.is_some());
        assert!(m.cpu_count >= 1);
        assert!(m.start_time.ends_with('Z'));
        let j = serde_json::to_value(&m).unwrap();
        assert!(j.get("governor").is_some());
    }
}
