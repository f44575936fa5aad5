//! Named codes of the control PDUs (RFC 7143), so that the target and the initiator match on
//! names rather than bare numbers: task management functions and responses (§11.5.1, §11.6.1),
//! the iSCSI response of a SCSI Response (§11.4.3), Logout reasons and responses (§11.14.1,
//! §11.15.1), asynchronous events (§11.9.1), and the text of Reject reasons (§11.17.1, whose
//! codes are in [`super::pdu_ctl::reject_reason`]).

/// Task Management Function Request functions (§11.5.1).
pub mod tmf_function {
    pub const ABORT_TASK: u8 = 1;
    pub const ABORT_TASK_SET: u8 = 2;
    pub const CLEAR_ACA: u8 = 3;
    pub const CLEAR_TASK_SET: u8 = 4;
    pub const LOGICAL_UNIT_RESET: u8 = 5;
    pub const TARGET_WARM_RESET: u8 = 6;
    pub const TARGET_COLD_RESET: u8 = 7;
    pub const TASK_REASSIGN: u8 = 8;
}

/// Task Management Function Response codes (§11.6.1).
pub mod tmf_response {
    pub const COMPLETE: u8 = 0;
    pub const TASK_DOES_NOT_EXIST: u8 = 1;
    pub const LUN_DOES_NOT_EXIST: u8 = 2;
    pub const TASK_STILL_ALLEGIANT: u8 = 3;
    pub const REASSIGNMENT_UNSUPPORTED: u8 = 4;
    pub const FUNCTION_NOT_SUPPORTED: u8 = 5;
    pub const AUTHORIZATION_FAILED: u8 = 6;
    pub const REJECTED: u8 = 255;
}

/// The Response field of a SCSI Response (§11.4.3); the SCSI status is beside it.
pub mod scsi_response {
    pub const COMMAND_COMPLETED: u8 = 0x00;
    pub const TARGET_FAILURE: u8 = 0x01;
}

/// Logout Request reason codes (§11.14.1).
pub mod logout_reason {
    pub const CLOSE_SESSION: u8 = 0;
    pub const CLOSE_CONNECTION: u8 = 1;
    pub const REMOVE_CONNECTION_FOR_RECOVERY: u8 = 2;
}

/// Logout Response codes (§11.15.1).
pub mod logout_response {
    /// Connection or session closed successfully.
    pub const CLOSED: u8 = 0;
    pub const CID_NOT_FOUND: u8 = 1;
    pub const RECOVERY_NOT_SUPPORTED: u8 = 2;
    pub const CLEANUP_FAILED: u8 = 3;
}

/// Asynchronous Message events (§11.9.1).
pub mod async_event {
    pub const SCSI_EVENT: u8 = 0;
    pub const LOGOUT_REQUESTED: u8 = 1;
    pub const CONNECTION_DROPPED: u8 = 2;
    pub const SESSION_DROPPED: u8 = 3;
    pub const NEGOTIATION_REQUESTED: u8 = 4;
    pub const TASK_TERMINATION: u8 = 5;
    pub const VENDOR_SPECIFIC: u8 = 255;
}

/// What a Reject reason means, for messages.
pub fn reject_text(reason: u8) -> &'static str {
    use super::pdu_ctl::reject_reason::*;
    match reason {
        DATA_DIGEST => "data digest error",
        SNACK_REJECT => "SNACK reject",
        PROTOCOL_ERROR => "protocol error",
        COMMAND_NOT_SUPPORTED => "command not supported",
        IMMEDIATE_REJECT => "immediate command rejected",
        TASK_IN_PROGRESS => "task in progress",
        INVALID_DATA_ACK => "invalid data ack",
        INVALID_PDU_FIELD => "invalid PDU field",
        LONG_OP_REJECT => "long operation reject",
        NEGOTIATION_RESET => "negotiation reset",
        WAITING_FOR_LOGOUT => "waiting for logout",
        _ => "reserved",
    }
}
