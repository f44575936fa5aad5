//! Task management (RFC 7143 §11.5-11.6). The target executes every command as it arrives,
//! so the only tasks a function can reach are writes still collecting Data-Out: aborting
//! them drops their data. Task reassignment needs ErrorRecoveryLevel 2 and ACA is never set,
//! so those two are not supported; a function code the RFC does not define is rejected.

use super::{sn_lt, Conn};
use crate::wire::bhs::Bhs;
use crate::wire::codes::{tmf_function as function, tmf_response as response};
use crate::wire::pdu_ctl::{TaskMgmtRequest, TaskMgmtResponse};

impl Conn {
    pub(super) fn on_tmf(&mut self, t: &TaskMgmtRequest) {
        let r = TaskMgmtResponse {
            response: self.tmf_response(t),
            itt: t.itt,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        self.send(Bhs::TaskMgmtResponse(r), &[]);
        // A cold reset drops every connection of the target (§11.5.1): this one, after the
        // response.
        if t.function == function::TARGET_COLD_RESET {
            self.close = true;
        }
    }

    /// Carries out the function and says how it went.
    fn tmf_response(&mut self, t: &TaskMgmtRequest) -> u8 {
        match t.function {
            // A task that already completed "does not exist" (§11.6.1); one whose command has
            // not arrived yet (RefCmdSN not below ExpCmdSN) counts as aborted.
            function::ABORT_TASK => {
                if self.tasks.remove(&t.ref_task_tag).is_some()
                    || !sn_lt(t.ref_cmd_sn, self.exp_cmd_sn)
                {
                    response::COMPLETE
                } else {
                    response::TASK_DOES_NOT_EXIST
                }
            }
            function::ABORT_TASK_SET
            | function::CLEAR_TASK_SET
            | function::LOGICAL_UNIT_RESET
            | function::TARGET_WARM_RESET
            | function::TARGET_COLD_RESET => {
                self.tasks.clear();
                response::COMPLETE
            }
            function::CLEAR_ACA | function::TASK_REASSIGN => response::FUNCTION_NOT_SUPPORTED,
            _ => response::REJECTED,
        }
    }
}
