//! The names of the stream threads: a contract with the bottleneck attribution, which tells
//! by a thread's name which target it drives.

/// Stream threads are named `sb-w{worker}-t{target}` (`sb-w0-t1`): the bottleneck attribution
/// (crates/cli/src/bottleneck.rs) tells by the name which target a thread drives. Linux keeps
/// 15 bytes of a thread's name.
pub const STREAM_THREAD_PREFIX: &str = "sb-w";

/// Between the worker and the target in a stream thread's name.
const STREAM_THREAD_TARGET: &str = "-t";

/// The name of the stream thread of `worker` on target `target`.
pub fn stream_thread_name(worker: usize, target: usize) -> String {
    format!("{STREAM_THREAD_PREFIX}{worker}{STREAM_THREAD_TARGET}{target}")
}

/// Whether `name` is a stream thread's, and one that drives target `target` (`None`: any
/// target).
pub fn is_stream_thread(name: &str, target: Option<usize>) -> bool {
    let Some(rest) = name.strip_prefix(STREAM_THREAD_PREFIX) else {
        return false;
    };
    match (target, rest.split_once(STREAM_THREAD_TARGET)) {
        (None, Some(_)) => true,
        (Some(i), Some((_, x))) => x.parse::<usize>().ok() == Some(i),
        _ => false,
    }
}

#[cfg(test)]
mod thread_name_tests {
    use super::*;

    #[test]
    fn stream_thread_names_read_back() {
        assert_eq!(stream_thread_name(0, 1), "sb-w0-t1");
        assert_eq!(stream_thread_name(31, 127), "sb-w31-t127");
        assert!(stream_thread_name(9999, 99999).len() <= 15);
        assert!(is_stream_thread("sb-w0-t1", Some(1)));
        assert!(is_stream_thread("sb-w3-t12", None));
        assert!(!is_stream_thread("sb-w0-t12", Some(1)));
        assert!(!is_stream_thread("sb-w0", None));
        assert!(!is_stream_thread("sb-sync0-1", None));
        assert!(!is_stream_thread("sb-nbd-c0", Some(0)));
    }
}
