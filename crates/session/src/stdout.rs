//! Standard output that a closed pipe does not crash.
//!
//! `println!` panics when stdout's reader has gone away (`sanbench suite show x | head -3`: the
//! Rust runtime ignores SIGPIPE, so the write fails with EPIPE and the macro panics). Every
//! printing command writes through `outln!` / `out!` instead:
//! once the reader is gone, later output is dropped and the command finishes its work (a
//! comparison still records its run) and exits as it would have, quietly, as ripgrep does.
//! SIGPIPE is not restored to its default: it would also kill a run whose NBD or iSCSI
//! socket's peer went away, where a typed error is what is wanted.

use sanbench_engine::poison;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

// Process-wide by nature, unlike the run state in context.rs: the process has one stdout,
// whatever runs in it.

/// Set once a write to stdout failed with a broken pipe: nothing more is written.
static GONE: AtomicBool = AtomicBool::new(false);
/// The first error other than a broken pipe (a full disk behind a redirection): reported at
/// exit, since the output is then incomplete.
static FAILED: Mutex<Option<String>> = Mutex::new(None);

fn note(e: io::Error) {
    GONE.store(true, Ordering::Relaxed);
    if e.kind() != io::ErrorKind::BrokenPipe {
        let mut f = poison::lock(&FAILED);
        f.get_or_insert_with(|| e.to_string());
    }
}

/// Writes formatted text to stdout; see the module docs for what happens on errors.
pub fn write_fmt(args: std::fmt::Arguments) {
    if GONE.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = io::stdout().lock().write_fmt(args) {
        note(e);
    }
}

/// Writes bytes (a JSON document) to stdout and flushes them.
pub fn write_bytes(bytes: &[u8]) {
    if GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_all(bytes).and_then(|_| o.flush()) {
        note(e);
    }
}

/// At exit: flushes what is buffered and returns the error that cut the output short, unless
/// that was the reader going away.
pub fn finish() -> Option<String> {
    if !GONE.load(Ordering::Relaxed) {
        if let Err(e) = io::stdout().lock().flush() {
            note(e);
        }
    }
    poison::lock(&FAILED).take()
}

/// `println!` to stdout without a panic when the reader has gone away.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` to stdout without a panic when the reader has gone away.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!($($arg)*))
    };
}
