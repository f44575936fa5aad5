//! Locks that outlive a panicking holder. A thread that panicked while holding one of
//! sanbench's mutexes (a stream, a sampler, a connection) must not take the run's report, the
//! other connections or the process down with it: every state these locks guard stays valid
//! between statements, so the guard is taken as it is. One place for the idiom, for every
//! crate: it lives here because this crate is the one both the engine and the monitor depend
//! on (the engine re-exports it as `sanbench_engine::poison` for the crates above it). It
//! spawns nothing and reads no clock, so the crate stays pure.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// `m.lock()`, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `cv.wait(g)`, poisoned or not.
pub fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g).unwrap_or_else(|p| p.into_inner())
}

/// `cv.wait_timeout(g, d)` without the timeout flag (callers check their own deadline),
/// poisoned or not.
pub fn wait_timeout<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>, d: Duration) -> MutexGuard<'a, T> {
    cv.wait_timeout(g, d)
        .map(|(g, _)| g)
        .unwrap_or_else(|p| p.into_inner().0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_panicking_holder_leaves_the_lock_usable() {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("holder dies");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
        let cv = Condvar::new();
        let g = wait_timeout(&cv, lock(&m), Duration::from_millis(1));
        assert_eq!(*g, 2);
    }
}
