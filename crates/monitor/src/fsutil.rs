//! Small file helpers shared by the monitors: read into reused buffers, join paths under a root.
//!
//! The sampler reads the same handful of procfs files every interval; reusing one `String`
//! keeps it free of per-sample allocation (see the overhead example).

use crate::error::{MonitorError, Result};
use std::io::Read;
use std::path::{Path, PathBuf};

/// `root` joined with an absolute path such as `/proc/stat` (the leading `/` is dropped, so the
/// result stays under `root`).
pub fn under(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// Reads the whole file into `buf` (cleared first), keeping its capacity for the next call.
pub fn read_into(path: &Path, buf: &mut String) -> Result<()> {
    buf.clear();
    let mut f = std::fs::File::open(path).map_err(|e| MonitorError::read(path, e))?;
    f.read_to_string(buf)
        .map_err(|e| MonitorError::read(path, e))?;
    Ok(())
}

/// Reads a small sysfs attribute and trims the trailing newline; `None` when absent or unreadable.
pub fn read_attr(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Like [`read_attr`] but keeps the error (for notes that say why).
pub fn read_attr_err(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| MonitorError::read(path, e))
}

/// Parses a decimal `u64` attribute.
pub fn read_u64(path: &Path) -> Result<u64> {
    let s = read_attr_err(path)?;
    s.parse::<u64>()
        .map_err(|_| MonitorError::parse(path, format!("not an unsigned integer: {s:?}")))
}

/// `sysconf(_SC_CLK_TCK)`: the unit of /proc/stat and /proc/PID/stat times (USER_HZ).
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions and only reads a constant of the C library.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// Simple glob with `*` (any run of characters, including none) and `?` (one character); no
/// classes. Enough for kernel thread names such as `kworker/*nvme_tcp*`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob() {
        assert!(glob_match("kworker/*nvme_tcp*", "kworker/1:1H-nvme_tcp_wq"));
        assert!(glob_match("ksoftirqd/*", "ksoftirqd/0"));
        assert!(glob_match("knbd*", "knbd0-recv"));
        assert!(!glob_match("kworker/*iscsi*", "kworker/0:1-events"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("iou-*", "iou-wrk-123"));
    }

    #[test]
    fn under_root() {
        assert_eq!(
            under(Path::new("/tmp/x"), "/proc/stat"),
            PathBuf::from("/tmp/x/proc/stat")
        );
        assert_eq!(
            under(Path::new("/"), "/proc/stat"),
            PathBuf::from("/proc/stat")
        );
    }
}
