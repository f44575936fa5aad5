//! sanbench as a library: `run`, `compare`, `crosscheck`, `verify` and the demo as functions
//! over a [`context::Context`] (one command's state: placement, watch, metrics registry, `mem:`
//! targets, the job) and a typed configuration built once ([`run_config::RunConfig`],
//! [`compare::config::CompareConfig`], [`crosscheck::CrosscheckConfig`],
//! [`verify_cmd::VerifyConfig`], [`demo::DemoConfig`]), returning typed results (the run's
//! `RunDoc`, the `Comparison`). The binary (crates/cli) parses the command line into these
//! configurations, calls, and maps the outcome to an exit code; nothing here reads its
//! arguments. How this process runs (alone or as a rank of an MPI job) is the [`job::Job`]
//! chosen once ([`job::select::for_command`]).

#[macro_use]
pub mod stdout;

pub mod bottleneck;
pub mod compare;
pub mod context;
pub mod crosscheck;
pub mod curve;
pub mod demo;
pub mod error;
pub mod eta;
pub mod events;
pub mod faults;
pub mod fit;
pub mod job;
pub mod launcher;
pub mod measure;
pub mod metrics;
pub mod monitoring;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod outfile;
pub mod partial;
pub mod passthrough;
pub mod placement;
pub mod precondition;
pub mod progress;
pub mod ranks;
pub mod replay;
pub mod run_cmd;
pub mod run_config;
pub mod serve;
pub mod serve_metrics;
pub mod servers;
pub mod signals;
pub mod sinks;
pub mod store_io;
pub mod targets;
pub mod verify_cmd;
pub mod watch;
