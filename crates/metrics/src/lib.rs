//! Live metrics of a run (`--metrics-listen`): counters, gauges and fixed-bucket histograms
//! kept in a [`expo::Registry`], rendered in the Prometheus text exposition format 0.0.4, and
//! served at `/metrics` by a tiny HTTP/1.1 server on its own thread.
//!
//! Why no HTTP library: one path, one method, a scrape a second; the request head is parsed
//! as untrusted input in [`http`] (bytes in, a request or an error out, bounded sizes, no
//! socket), which has its own fuzz target, and [`server`] is the only code that touches a
//! socket.

pub mod expo;
pub mod http;
pub mod server;
