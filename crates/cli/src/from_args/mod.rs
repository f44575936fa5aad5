//! The command line's arguments made into the library's typed configurations, once, every
//! value checked before anything opens (as ripgrep builds its config from its flags). Only the
//! binary's side reads [`crate::args`]; the library takes what these build.

pub mod compare;
pub mod crosscheck;
pub mod data;
pub mod demo;
pub mod replay;
pub mod run;
pub mod serve;
pub mod verify;
