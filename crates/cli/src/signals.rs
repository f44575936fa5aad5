//! Ctrl-C and SIGTERM end a run early but cleanly: the window ends where it stopped, results
//! are still written, servers and labs are torn down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_signal(sig: libc::c_int) {
    if let Some(f) = FLAG.get() {
        f.store(true, Ordering::SeqCst);
    }
    // A second Ctrl-C kills at once.
    // SAFETY: signal() is async-signal-safe.
    unsafe { libc::signal(sig, libc::SIG_DFL) };
}

/// Installs the handler (once) and returns the flag it sets.
pub fn stop_flag() -> Arc<AtomicBool> {
    let flag = FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    flag
}
