//! Output files named on the command line, checked before the work that fills them: a run or a
//! verification pass can take minutes, and a typo in `--json DIR/FILE` found only at its end
//! would lose the result.

use std::path::Path;

use crate::error::{usage, CliError};

/// `path` (given as `flag`) can be written when the work is done: `-` (stdout); an existing
/// file (or FIFO, device, link to one) this process may write (access(2): nothing is opened or
/// changed); or a new name in an existing directory it may write in. Otherwise one line of
/// bad input.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), CliError> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(usage(format!("{flag} {shown}: is a directory, not a file")))
        }
        // Asked, not opened: an open for writing would block on a FIFO with no reader, and
        // one with a reader would hand it an early end of file.
        Ok(_) => {
            return rustix::fs::access(path, rustix::fs::Access::WRITE_OK)
                .map_err(|e| usage(format!("{flag} {shown}: cannot write it: {e}")));
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(usage(format!("{flag} {shown}: {e}")));
        }
        Err(_) => {}
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Err(usage(format!(
            "{flag} {shown}: there is no directory {}",
            dir.display()
        )));
    }
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).map_err(|e| {
        usage(format!(
            "{flag} {shown}: cannot create a file in {}: {e}",
            dir.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_can_be_written_and_what_cannot() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert!(check_writable("--json", Path::new("-")).is_ok());
        assert!(check_writable("--json", &d.join("new.json")).is_ok());
        std::fs::write(d.join("old.json"), "keep").unwrap();
        assert!(check_writable("--json", &d.join("old.json")).is_ok());
        assert_eq!(std::fs::read_to_string(d.join("old.json")).unwrap(), "keep");
        assert!(!d.join("new.json").exists(), "a check creates nothing");
        let e = check_writable("--json", &d.join("no/such/x.json")).unwrap_err();
        assert_eq!(e.code(), 2);
        assert!(e.message().contains("there is no directory"), "{e:?}");
        let e = check_writable("--json", d).unwrap_err();
        assert!(e.message().contains("is a directory"), "{e:?}");
        // A FIFO nobody reads: checked without opening it (an open for writing would wait
        // for a reader), so the check returns at once.
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(check_writable("--json", &fifo).is_ok()));
        let ok = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(ok, Ok(true), "the check of a FIFO waited for a reader");
    }
}
