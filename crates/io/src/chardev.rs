//! The character device a passthrough engine drives (SCSI generic `sg`, `bsg`, NVMe generic
//! `ng`): opened the one way, so that every scheme tells bad input (exit 2) from a failed
//! open (exit 1) alike.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use crate::EngineError;

/// Opens `path` for reading, and writing with `write`, once it is a character device. A
/// device that is not there, or a file of another kind, is `Invalid` (bad input, as a URI
/// that names none); `takes` says what the scheme takes instead, after "not a character
/// device". Any other failure is `Open`.
pub fn open(path: &Path, write: bool, takes: &str) -> Result<File, EngineError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => EngineError::Invalid(format!("{shown}: no such device")),
        _ => EngineError::Open {
            path: shown.clone(),
            source,
        },
    })?;
    if !meta.file_type().is_char_device() {
        return Err(EngineError::Invalid(format!(
            "{shown}: not a character device ({takes})"
        )));
    }
    OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|source| EngineError::Open {
            path: shown,
            source,
        })
}
