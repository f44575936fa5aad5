//! Live metrics (`--metrics-listen` on `run`, `compare` and `serve`): figures rendered in the
//! Prometheus text exposition format 0.0.4, or OpenMetrics 1.0 when the scraper asks for it
//! ([`expo`]), and served at `/metrics` by a tiny HTTP/1.1 server on its own thread. A run's
//! figures are kept in a [`registry::Registry`]; a server's are read from its counters at
//! each scrape (the CLI implements [`expo::Exposition`] for them).
//!
//! Why no HTTP library: one path, one method, a scrape a second; the request head is parsed
//! as untrusted input in [`http`] (bytes in, a request or an error out, bounded sizes, no
//! socket), which has its own fuzz target, and [`server`] is the only code that touches a
//! socket.

pub mod expo;
pub mod http;
pub mod registry;
pub mod server;
