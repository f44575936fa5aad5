//! The endpoint's socket side: one thread accepts connections one at a time, reads a request
//! head (bounded in size and time), answers it and closes the connection. `/metrics` gets the
//! exposition in the format the request's `Accept` asks for (OpenMetrics or Prometheus text),
//! with the endpoint's own scrape counter last; anything else a 404 or 405, a bad head a 400
//! naming what was wrong.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::expo::{labels, Exposition, Format, Kind, Writer};
use crate::http::{parse, HttpError, MAX_HEAD};

/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// A bound endpoint, not yet serving.
pub struct Endpoint {
    listener: TcpListener,
}

/// Scrapes answered, per format (the endpoint's own figure, last in every exposition).
#[derive(Default)]
struct Scrapes([AtomicU64; 2]);

impl Scrapes {
    fn render(&self, w: &mut Writer) {
        w.family(
            "sanbench_scrapes",
            Kind::Counter,
            "Scrapes this endpoint answered, by the format it answered in (this one included).",
            None,
        );
        for f in [Format::Prometheus, Format::OpenMetrics] {
            let n = self.0[f as usize].load(Ordering::Relaxed);
            w.sample(
                "sanbench_scrapes_total",
                &labels(&[("format", f.name())]),
                n,
            );
        }
    }
}

impl Endpoint {
    /// Binds `addr` (a port in use or an address not on this host fails here, before the run).
    pub fn bind(addr: SocketAddr) -> std::io::Result<Endpoint> {
        Ok(Endpoint {
            listener: TcpListener::bind(addr)?,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `/metrics` from `source` on a thread of its own for the rest of the process.
    pub fn serve(self, source: Arc<dyn Exposition>) -> std::io::Result<()> {
        let scrapes = Scrapes::default();
        std::thread::Builder::new()
            .name("sb-metrics".into())
            .spawn(move || {
                for conn in self.listener.incoming() {
                    match conn {
                        // A client that misbehaves costs its own connection, nothing more.
                        Ok(c) => {
                            let _ = answer(c, &*source, &scrapes);
                        }
                        // Out of descriptors, say: no busy loop while it lasts.
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
            .map(|_| ())
    }
}

fn answer(mut c: TcpStream, source: &dyn Exposition, scrapes: &Scrapes) -> std::io::Result<()> {
    c.set_read_timeout(Some(READ_TIMEOUT))?;
    c.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut have = 0;
    let parsed = loop {
        let n = c.read(&mut buf[have..])?;
        if n == 0 {
            return Ok(());
        }
        have += n;
        match parse(&buf[..have]) {
            Ok(Some((req, _))) => {
                break Ok((
                    req.method.to_string(),
                    req.path.to_string(),
                    Format::negotiate(req.accept),
                ))
            }
            Ok(None) if have < buf.len() => continue,
            Ok(None) => break Err(HttpError::TooLarge),
            Err(e) => break Err(e),
        }
    };
    let (status, ctype, body) = match parsed {
        Err(e @ HttpError::TooLarge) | Err(e @ HttpError::TooManyHeaders) => (
            "431 Request Header Fields Too Large",
            "text/plain",
            format!("{e}\n"),
        ),
        Err(e) => ("400 Bad Request", "text/plain", format!("{e}\n")),
        Ok((m, _, _)) if m != "GET" && m != "HEAD" => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics only\n".into(),
        ),
        Ok((_, p, _)) if p != "/metrics" => {
            ("404 Not Found", "text/plain", "GET /metrics\n".into())
        }
        Ok((m, _, format)) => {
            scrapes.0[format as usize].fetch_add(1, Ordering::Relaxed);
            let mut w = Writer::new(format);
            source.render(&mut w);
            scrapes.render(&mut w);
            let text = w.finish();
            (
                "200 OK",
                format.content_type(),
                if m == "HEAD" { String::new() } else { text },
            )
        }
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())?;
    c.flush()
}
