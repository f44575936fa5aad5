//! What the process tracker groups and reports: `--watch` specifications, the default
//! kernel-thread patterns, and the per-group and per-thread figures of a window.

use serde::{Deserialize, Serialize};

/// What a `--watch` argument names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchSpec {
    Pid(u32),
    Name(String),
}

impl WatchSpec {
    /// All digits → pid, anything else → a process name.
    pub fn parse(s: &str) -> WatchSpec {
        match s.parse::<u32>() {
            Ok(p) => WatchSpec::Pid(p),
            Err(_) => WatchSpec::Name(s.to_string()),
        }
    }

    pub(super) fn matches(&self, pid: u32, comm: &str) -> bool {
        match self {
            WatchSpec::Pid(p) => *p == pid,
            // comm is truncated to 15 bytes (TASK_COMM_LEN − 1), so compare the prefix too.
            WatchSpec::Name(n) => comm == n || (comm.len() == 15 && n.starts_with(comm)),
        }
    }

    pub(super) fn label(&self) -> String {
        match self {
            WatchSpec::Pid(p) => format!("watch:{p}"),
            WatchSpec::Name(n) => format!("watch:{n}"),
        }
    }
}

/// Default kernel-thread patterns: storage workqueue kworkers, NBD receive threads, softirq
/// threads and io_uring workers, and the threads of the kernel's SAN stacks as Linux 6.1 names
/// them (seen in the guest of crates/cli/tests/kernel_san.rs, docs/KERNEL-TRANSPORTS.md):
/// * iSCSI initiator: the `iscsi_q_N` workqueue (open-iscsi's iscsi_tcp transmit work);
///   LIO's iSCSI target: `iscsi_ttx` / `iscsi_trx` per connection, `iscsi_np` per portal;
/// * NVMe/TCP: `nvme_tcp_wq` (host), `nvmet_tcp_wq` and `nvmet-wq` (target);
/// * RDMA (iSER, NVMe/RDMA, soft-RoCE): completion queues polled from `ib-comp-wq` and
///   `ib-comp-unb-wq`; rdma_rxe itself works in tasklets, i.e. softirq (`ksoftirqd/N`);
/// * LIO's core (every fabric: tcm_fc, iSCSI, iSER): `target_completion`/`target_submission`;
/// * FC: LIO's tcm_fc receives commands on its `tcm_fc` workqueue; libfc's exchange and
///   remote-port workqueues (`fc_exch_workque[ue]`, `fc_rport_eq`);
///   software FCoE receives in per-CPU work on the shared `events` workqueue and in softirq,
///   so only its softirq part is attributed (the shared kworkers would count everything).
pub fn default_kernel_patterns() -> Vec<String> {
    [
        "kworker/*iscsi*",
        "kworker/*nvme_tcp*",
        "kworker/*nvme-wq*",
        "kworker/*nvmet*",
        "kworker/*ib-comp*",
        "kworker/*target_*",
        "kworker/*tcm_fc*",
        "kworker/*fc_exch*",
        "kworker/*fc_rport*",
        "kworker/*nbd*",
        "iscsi_ttx",
        "iscsi_trx",
        "iscsi_np",
        "knbd*",
        "ksoftirqd/*",
        "iou-wrk-*",
        "iou-sqp-*",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub use sanbench_doc::host::{GroupReport, ThreadReport};

/// One thread of a process group over the window ([`super::ProcessTracker::threads`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupThread {
    /// "self" or "watch:SPEC".
    pub group: String,
    /// The process's name (comm).
    pub process: String,
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// Seconds on a CPU.
    pub cpu_s: f64,
    /// Seconds runnable but waiting for a CPU, where the kernel says.
    pub wait_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::glob_match;

    #[test]
    fn watch_specs() {
        assert_eq!(WatchSpec::parse("123"), WatchSpec::Pid(123));
        let w = WatchSpec::parse("tgtd");
        assert!(w.matches(5, "tgtd"));
        assert!(!w.matches(5, "tgtd2"));
        // comm truncated to 15 bytes.
        let w = WatchSpec::parse("a-very-long-process-name");
        assert!(w.matches(5, "a-very-long-pro"));
    }

    fn kernel(comm: &str) -> bool {
        default_kernel_patterns()
            .iter()
            .any(|p| glob_match(p, comm))
    }

    /// Thread names as a Linux 6.1 guest showed them with every SAN stack up
    /// (crates/cli/tests/kernel_san.rs).
    #[test]
    fn san_stack_threads_are_kernel_and_generic_ones_are_not() {
        for comm in [
            "kworker/u2:3-iscsi_q_2",
            "iscsi_ttx",
            "iscsi_trx",
            "iscsi_np",
            "kworker/0:1H-nvme_tcp_wq",
            "kworker/u2:0-nvme-wq",
            "kworker/0:2H-nvmet_tcp_wq",
            "kworker/u2:2-nvmet-wq",
            "kworker/0:1H-ib-comp-wq",
            "kworker/u3:1-ib-comp-unb-wq",
            "kworker/0:3-target_completion",
            "kworker/0:2-tcm_fc",
            "kworker/u2:1-fc_exch_workqueue",
            "kworker/u2:1-fc_rport_eq",
            "ksoftirqd/0",
        ] {
            assert!(kernel(comm), "{comm}");
        }
        for comm in [
            "kworker/0:2-events",
            "kworker/u2:3-events_unbound",
            "kworker/0:0-rcu_gp",
            "scsi_eh_2",
            "kthreadd",
            "rcu_preempt",
        ] {
            assert!(!kernel(comm), "{comm}");
        }
    }
}
