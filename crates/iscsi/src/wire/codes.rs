//! Named codes of the control PDUs (RFC 7143), so that the target and the initiator match on
//! names rather than bare numbers: the status of a Login Response (§11.13.5), task management
//! functions and responses (§11.5.1, §11.6.1), the iSCSI response of a SCSI Response
//! (§11.4.3), Logout reasons and responses (§11.14.1, §11.15.1), asynchronous events (§11.9.1),
//! and Reject reasons with their text (§11.17.1).

use std::fmt;

/// The Status-Class and Status-Detail of a Login Response (§11.13.5), bytes 36 and 37 of its
/// header. Class 0 is success, 1 redirection, 2 an initiator error, 3 a target error; any
/// other class is a failure too. `Display` names it with both numbers, e.g.
/// "authentication failed (status class 2, detail 1)".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoginStatus {
    pub class: u8,
    pub detail: u8,
}

impl LoginStatus {
    const fn new(class: u8, detail: u8) -> LoginStatus {
        LoginStatus { class, detail }
    }
    pub const SUCCESS: LoginStatus = LoginStatus::new(0, 0);
    pub const TARGET_MOVED_TEMPORARILY: LoginStatus = LoginStatus::new(1, 1);
    pub const TARGET_MOVED_PERMANENTLY: LoginStatus = LoginStatus::new(1, 2);
    pub const INITIATOR_ERROR: LoginStatus = LoginStatus::new(2, 0);
    pub const AUTH_FAILURE: LoginStatus = LoginStatus::new(2, 1);
    pub const AUTHORIZATION_FAILURE: LoginStatus = LoginStatus::new(2, 2);
    pub const NOT_FOUND: LoginStatus = LoginStatus::new(2, 3);
    pub const TARGET_REMOVED: LoginStatus = LoginStatus::new(2, 4);
    pub const UNSUPPORTED_VERSION: LoginStatus = LoginStatus::new(2, 5);
    pub const TOO_MANY_CONNECTIONS: LoginStatus = LoginStatus::new(2, 6);
    pub const MISSING_PARAMETER: LoginStatus = LoginStatus::new(2, 7);
    pub const CANNOT_INCLUDE_IN_SESSION: LoginStatus = LoginStatus::new(2, 8);
    pub const SESSION_TYPE_UNSUPPORTED: LoginStatus = LoginStatus::new(2, 9);
    pub const SESSION_DOES_NOT_EXIST: LoginStatus = LoginStatus::new(2, 10);
    pub const INVALID_DURING_LOGIN: LoginStatus = LoginStatus::new(2, 11);
    pub const TARGET_ERROR: LoginStatus = LoginStatus::new(3, 0);
    pub const SERVICE_UNAVAILABLE: LoginStatus = LoginStatus::new(3, 1);
    pub const OUT_OF_RESOURCES: LoginStatus = LoginStatus::new(3, 2);

    /// Class 0: the login goes on (or is done). Any other class ends it: the target closes
    /// the connection after the response.
    pub fn is_success(self) -> bool {
        self.class == 0
    }

    /// Class 1: the target is elsewhere (the response carries TargetAddress).
    pub fn is_redirect(self) -> bool {
        self.class == 1
    }

    /// What the status means, for messages: the detail's name, or its class's for a detail
    /// this table does not know.
    pub fn name(self) -> &'static str {
        match self {
            Self::SUCCESS => "success",
            Self::TARGET_MOVED_TEMPORARILY => "target moved temporarily",
            Self::TARGET_MOVED_PERMANENTLY => "target moved permanently",
            Self::AUTH_FAILURE => "authentication failed",
            Self::AUTHORIZATION_FAILURE => {
                "authorization failed: this initiator may not access the target"
            }
            Self::NOT_FOUND => "target not found",
            Self::TARGET_REMOVED => "target removed",
            Self::UNSUPPORTED_VERSION => "unsupported iSCSI version",
            Self::TOO_MANY_CONNECTIONS => "too many connections",
            Self::MISSING_PARAMETER => "missing parameter",
            Self::CANNOT_INCLUDE_IN_SESSION => "cannot include in session",
            Self::SESSION_TYPE_UNSUPPORTED => "session type not supported",
            Self::SESSION_DOES_NOT_EXIST => "session does not exist",
            Self::INVALID_DURING_LOGIN => "invalid request during login",
            Self::SERVICE_UNAVAILABLE => "target service unavailable",
            Self::OUT_OF_RESOURCES => "target out of resources",
            LoginStatus { class: 0, .. } => "success",
            LoginStatus { class: 1, .. } => "target moved",
            LoginStatus { class: 2, .. } => "initiator error",
            _ => "target error",
        }
    }
}

impl fmt::Display for LoginStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (status class {}, detail {})",
            self.name(),
            self.class,
            self.detail
        )
    }
}

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

/// Reject reasons (§11.17.1).
pub mod reject_reason {
    pub const DATA_DIGEST: u8 = 0x02;
    pub const SNACK_REJECT: u8 = 0x03;
    pub const PROTOCOL_ERROR: u8 = 0x04;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x05;
    pub const IMMEDIATE_REJECT: u8 = 0x06;
    pub const TASK_IN_PROGRESS: u8 = 0x07;
    pub const INVALID_DATA_ACK: u8 = 0x08;
    pub const INVALID_PDU_FIELD: u8 = 0x09;
    pub const LONG_OP_REJECT: u8 = 0x0a;
    pub const NEGOTIATION_RESET: u8 = 0x0b;
    pub const WAITING_FOR_LOGOUT: u8 = 0x0c;
}

/// What a Reject reason means, for messages.
pub fn reject_text(reason: u8) -> &'static str {
    use reject_reason::*;
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

#[cfg(test)]
mod tests {
    use super::LoginStatus;

    #[test]
    fn login_status_names_and_numbers() {
        assert_eq!(
            LoginStatus::AUTH_FAILURE.to_string(),
            "authentication failed (status class 2, detail 1)"
        );
        assert_eq!(
            LoginStatus::TARGET_ERROR.to_string(),
            "target error (status class 3, detail 0)"
        );
        // A detail the table does not know is named by its class.
        assert_eq!(
            LoginStatus {
                class: 2,
                detail: 99
            }
            .name(),
            "initiator error"
        );
        assert_eq!(
            LoginStatus {
                class: 1,
                detail: 3
            }
            .name(),
            "target moved"
        );
        assert!(LoginStatus::SUCCESS.is_success() && LoginStatus::default().is_success());
        assert!(!LoginStatus::NOT_FOUND.is_success());
        assert!(LoginStatus::TARGET_MOVED_PERMANENTLY.is_redirect());
    }
}
