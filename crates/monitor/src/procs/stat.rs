//! One line of `/proc/PID/stat` or `/proc/PID/task/TID/stat`, parsed without allocating.
//!
//! `utime` (field 14) and `stime` (field 15) are in USER_HZ ticks. The command name (field 2)
//! sits between parentheses and may itself contain spaces and parentheses, so fields are
//! counted after the **last** `)`.

/// The fields of a `/proc/[pid]/stat` line that sanbench uses, borrowing the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskStat<'a> {
    pub pid: u32,
    pub comm: &'a str,
    pub state: char,
    /// Field 14, ticks.
    pub utime: u64,
    /// Field 15, ticks.
    pub stime: u64,
    /// Field 20.
    pub num_threads: u64,
    /// Field 22, ticks since boot.
    pub starttime: u64,
}

/// Parses one stat line. The name is everything between the first `(` and the last `)`.
pub fn parse_task_stat(line: &str) -> Option<TaskStat<'_>> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = line[..open].trim().parse().ok()?;
    let comm = &line[open + 1..close];
    // After ")" come fields 3.. : state(3) ppid(4) ... utime(14) stime(15) ... num_threads(20)
    // itrealvalue(21) starttime(22).
    let mut it = line[close + 1..].split_ascii_whitespace();
    let state = it.next()?.chars().next()?;
    let mut rest = it.skip(10); // fields 4..=13
    let utime = rest.next()?.parse().ok()?;
    let stime = rest.next()?.parse().ok()?;
    let mut rest = rest.skip(4); // 16..=19
    let num_threads = rest.next()?.parse().ok()?;
    let mut rest = rest.skip(1); // 21
    let starttime = rest.next()?.parse().ok()?;
    Some(TaskStat {
        pid,
        comm,
        state,
        utime,
        stime,
        num_threads,
        starttime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weird_names() {
        let line = "4242 ((my (weird) proc)) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 75 0 0 20 0 3 0 12345 1000000 100 18446744073709551615";
        let st = parse_task_stat(line).unwrap();
        assert_eq!(st.pid, 4242);
        assert_eq!(st.comm, "(my (weird) proc)");
        assert_eq!(st.state, 'S');
        assert_eq!(st.utime, 250);
        assert_eq!(st.stime, 75);
        assert_eq!(st.num_threads, 3);
        assert_eq!(st.starttime, 12345);

        let line = "7 (a b ) c) R 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 9 0 0";
        let st = parse_task_stat(line).unwrap();
        assert_eq!(st.comm, "a b ) c");
        assert_eq!((st.utime, st.stime), (1, 2));
    }

    #[test]
    fn truncated_lines_are_none() {
        assert!(parse_task_stat("").is_none());
        assert!(parse_task_stat("1 (x) S 1 2 3").is_none());
        assert!(parse_task_stat("1 )x( S").is_none());
        assert!(parse_task_stat("x (y) S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 9").is_none());
    }
}
