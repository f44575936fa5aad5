//! What `dmsetup table` and `dmsetup status` print for a dm-multipath device, parsed: the
//! formats `multipath_status` in Linux's drivers/md/dm-mpath.c writes (the code is the
//! reference; the table's is also what `multipath_ctr` reads).
//!
//! Table: `START LEN multipath #FEATURES FEATURE… #HW HW… #GROUPS FIRST_GROUP`, then per
//! group `SELECTOR #SEL_ARGS ARG… #PATHS #PATH_ARGS`, then per path `MAJ:MIN ARG…`.
//! Status: `START LEN multipath #FEATURES FEATURE… #HW HW… #GROUPS NEXT_GROUP`, then per group
//! `A|E|D #SEL_STATUS ARG… #PATHS #PATH_INFO`, then per path `MAJ:MIN A|F FAIL_COUNT INFO…`.
//! The output is a local tool's, but it is still parsed without trusting it: every count is
//! checked against what is left, and anything malformed is `None`.

/// A multipath table (`dmsetup table NAME`), first `multipath` target only.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// e.g. `["queue_if_no_path"]`, `["queue_mode", "bio"]`.
    pub features: Vec<String>,
    /// The hardware handler and its arguments (`["alua"]`), empty when none.
    pub hw_handler: Vec<String>,
    pub groups: Vec<TableGroup>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableGroup {
    /// `round-robin`, `queue-length`, `service-time`, `historical-service-time`.
    pub selector: String,
    pub selector_args: Vec<String>,
    /// Each path's `MAJ:MIN`, in table order.
    pub paths: Vec<String>,
}

/// A multipath status (`dmsetup status NAME`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    pub groups: Vec<StatusGroup>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusGroup {
    /// `A` active, `E` enabled, `D` disabled.
    pub state: String,
    pub paths: Vec<StatusPath>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusPath {
    pub dev: String,
    /// `A` (active) or `F` (failed).
    pub active: bool,
    pub fail_count: u64,
}

struct Tokens<'a>(
    std::iter::Peekable<std::str::SplitAsciiWhitespace<'a>>,
    usize,
);

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Tokens<'a> {
        Tokens(
            s.split_ascii_whitespace().peekable(),
            s.split_ascii_whitespace().count(),
        )
    }
    fn word(&mut self) -> Option<&'a str> {
        let w = self.0.next()?;
        self.1 -= 1;
        Some(w)
    }
    /// A count, never more than the words left (each counted thing takes at least one).
    fn count(&mut self) -> Option<usize> {
        let n: usize = self.word()?.parse().ok()?;
        (n <= self.1).then_some(n)
    }
    fn words(&mut self, n: usize) -> Option<Vec<String>> {
        (0..n).map(|_| self.word().map(str::to_string)).collect()
    }
    fn counted(&mut self) -> Option<Vec<String>> {
        let n = self.count()?;
        self.words(n)
    }
}

/// The line of `out` whose target type is `multipath`, past `START LEN multipath`.
fn multipath_line(out: &str) -> Option<Tokens<'_>> {
    out.lines().find_map(|l| {
        let mut t = Tokens::new(l);
        t.word()?;
        t.word()?;
        (t.word()? == "multipath").then_some(t)
    })
}

/// Parses `dmsetup table NAME`; `None` unless it holds a well-formed multipath target.
pub fn parse_table(out: &str) -> Option<Table> {
    let mut t = multipath_line(out)?;
    let features = t.counted()?;
    let hw_handler = t.counted()?;
    let ngroups = t.count()?;
    t.word()?; // the group tried first
    let mut groups = Vec::with_capacity(ngroups);
    for _ in 0..ngroups {
        let selector = t.word()?.to_string();
        let selector_args = t.counted()?;
        let npaths = t.count()?;
        let nargs = t.count()?;
        let mut paths = Vec::with_capacity(npaths);
        for _ in 0..npaths {
            paths.push(t.word()?.to_string());
            t.words(nargs)?;
        }
        groups.push(TableGroup {
            selector,
            selector_args,
            paths,
        });
    }
    Some(Table {
        features,
        hw_handler,
        groups,
    })
}

/// Parses `dmsetup status NAME`; `None` unless it holds a well-formed multipath status.
pub fn parse_status(out: &str) -> Option<Status> {
    let mut t = multipath_line(out)?;
    t.counted()?; // features: queueing now, pg_init count
    t.counted()?; // hardware handler
    let ngroups = t.count()?;
    t.word()?; // the group to use next
    let mut groups = Vec::with_capacity(ngroups);
    for _ in 0..ngroups {
        let state = t.word()?.to_string();
        t.counted()?; // the selector's status of the group
        let npaths = t.count()?;
        let ninfo = t.count()?;
        let mut paths = Vec::with_capacity(npaths);
        for _ in 0..npaths {
            let dev = t.word()?.to_string();
            let active = match t.word()? {
                "A" => true,
                "F" => false,
                _ => return None,
            };
            let fail_count = t.word()?.parse().ok()?;
            t.words(ninfo)?;
            paths.push(StatusPath {
                dev,
                active,
                fail_count,
            });
        }
        groups.push(StatusGroup { state, paths });
    }
    Some(Status { groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    // As Linux 6.1 printed them in the test guest (crates/cli/tests/kernel_multipath.rs).
    const TABLE: &str =
        "0 65536 multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 8:0 1 8:16 1 \n";
    const STATUS: &str = "0 65536 multipath 2 0 0 0 1 1 A 0 2 0 8:0 A 0 8:16 F 1 \n";
    const ST_TABLE: &str = "0 65536 multipath 0 1 alua 1 1 service-time 0 2 2 8:0 1 1 8:16 1 1 \n";
    const ST_STATUS: &str = "0 65536 multipath 2 1 0 0 1 1 E 0 2 2 8:0 A 0 0 1 8:16 A 0 4096 1\n";

    #[test]
    fn round_robin_table_and_status() {
        let t = parse_table(TABLE).unwrap();
        assert_eq!(t.features, ["queue_if_no_path"]);
        assert!(t.hw_handler.is_empty());
        assert_eq!(t.groups.len(), 1);
        assert_eq!(t.groups[0].selector, "round-robin");
        assert_eq!(t.groups[0].paths, ["8:0", "8:16"]);
        let s = parse_status(STATUS).unwrap();
        assert_eq!(s.groups[0].state, "A");
        assert_eq!(
            s.groups[0].paths,
            [
                StatusPath {
                    dev: "8:0".into(),
                    active: true,
                    fail_count: 0
                },
                StatusPath {
                    dev: "8:16".into(),
                    active: false,
                    fail_count: 1
                }
            ]
        );
    }

    #[test]
    fn service_time_with_handler_and_path_info() {
        let t = parse_table(ST_TABLE).unwrap();
        assert!(t.features.is_empty());
        assert_eq!(t.hw_handler, ["alua"]);
        assert_eq!(t.groups[0].selector, "service-time");
        assert_eq!(t.groups[0].paths, ["8:0", "8:16"]);
        let s = parse_status(ST_STATUS).unwrap();
        assert_eq!(s.groups[0].paths.len(), 2);
        assert!(s.groups[0].paths.iter().all(|p| p.active));
    }

    #[test]
    fn other_targets_and_malformed_output_are_none() {
        assert_eq!(parse_table("0 65536 linear 8:0 0\n"), None);
        assert_eq!(parse_status(""), None);
        // Every truncation of a good line is refused, never a panic.
        let prefixes = |full: &str| {
            let words: Vec<&str> = full.split_ascii_whitespace().collect();
            (0..words.len())
                .map(|n| words[..n].join(" "))
                .collect::<Vec<_>>()
        };
        for cut in prefixes(TABLE).iter().chain(&prefixes(ST_TABLE)) {
            assert_eq!(parse_table(cut), None, "{cut}");
        }
        for cut in prefixes(STATUS).iter().chain(&prefixes(ST_STATUS)) {
            assert_eq!(parse_status(cut), None, "{cut}");
        }
        // Counts beyond what is there, and garbage in place of numbers.
        assert_eq!(
            parse_table("0 1 multipath 99999999999 x 0 1 1 round-robin 0 1 1 8:0 1"),
            None
        );
        assert_eq!(
            parse_status("0 1 multipath 2 0 0 0 1 1 A 0 1 0 8:0 X 0"),
            None
        );
        assert_eq!(parse_table("0 1 multipath -1"), None);
    }
}
