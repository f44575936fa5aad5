//! The NVMe/TCP host: [`conn::Connection`] moves PDUs over one socket; [`session`] brings a
//! controller up (admin queue Connect, CC.EN then CSTS.RDY, Identify) and connects I/O queues,
//! with [`session::exec`] running one command to completion (in-capsule data, R2T/H2CData,
//! C2HData). The engine pipelines commands over the same `Connection`. [`ana`]: the admin
//! queue's ANA side (the state of the namespace through this controller, the change notice).

pub mod ana;
pub mod conn;
pub mod session;

use std::io;

use thiserror::Error;

use crate::wire::status::Status;
use crate::wire::WireError;

#[derive(Debug, Error)]
pub enum HostError {
    #[error("{0}")]
    Io(#[source] io::Error),
    #[error("timed out waiting for the controller ({0})")]
    Timeout(&'static str),
    #[error("the controller closed the connection")]
    Closed,
    #[error("the controller sent a bad PDU: {0}")]
    Wire(#[from] WireError),
    #[error("the controller ended the connection (C2HTermReq, FES {fes}, FEI {fei})")]
    Terminated { fes: u16, fei: u32 },
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("{op} failed: {status}")]
    Status { op: &'static str, status: Status },
}

impl HostError {
    pub(crate) fn from_io(e: io::Error) -> HostError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HostError::Timeout("a reply"),
            _ => HostError::Io(e),
        }
    }
}

impl From<io::Error> for HostError {
    fn from(e: io::Error) -> HostError {
        HostError::from_io(e)
    }
}
