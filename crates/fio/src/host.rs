//! The [`Host`] of a job file on disk: the process's environment and the filesystem, for the
//! command line (the parser itself reads neither, so the fuzz target and the tests give their
//! own).

use std::path::{Path, PathBuf};

use crate::Host;

/// Files and the environment for the parser: an `include` names a file as written, or, when
/// that does not exist, beside the file that includes it (as fio does).
pub struct FsHost;

impl Host for FsHost {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn include(&mut self, from: &str, name: &str) -> Result<(String, String), String> {
        let mut p = PathBuf::from(name);
        if !p.exists() {
            if let Some(dir) = Path::new(from).parent() {
                p = dir.join(name);
            }
        }
        let text = std::fs::read_to_string(&p).map_err(|e| e.to_string())?;
        Ok((p.display().to_string(), text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_beside_the_including_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("common.fio"), "bs=8k\n").unwrap();
        let from = d.path().join("job.fio").display().to_string();
        let (name, text) = FsHost.include(&from, "common.fio").unwrap();
        assert_eq!(name, d.path().join("common.fio").display().to_string());
        assert_eq!(text, "bs=8k\n");
        assert!(FsHost.include(&from, "missing.fio").is_err());
    }
}
