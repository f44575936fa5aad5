//! The endpoint's socket side: one thread accepts connections one at a time, reads a request
//! head (bounded in size and time), answers it and closes the connection. `/metrics` gets the
//! registry's text; anything else a 404 or 405, a bad head a 400 naming what was wrong.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::expo::Registry;
use crate::http::{parse, HttpError, MAX_HEAD};

/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Called before each scrape is rendered (to refresh gauges such as the host's CPU).
pub type Refresh = Box<dyn Fn(&Registry) + Send + Sync>;

/// A bound endpoint, not yet serving.
pub struct Endpoint {
    listener: TcpListener,
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

    /// Serves `/metrics` on a thread of its own for the rest of the process.
    pub fn serve(self, registry: Arc<Registry>, refresh: Refresh) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("sb-metrics".into())
            .spawn(move || {
                for conn in self.listener.incoming() {
                    match conn {
                        // A client that misbehaves costs its own connection, nothing more.
                        Ok(c) => {
                            let _ = answer(c, &registry, &refresh);
                        }
                        // Out of descriptors, say: no busy loop while it lasts.
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
            .map(|_| ())
    }
}

fn answer(mut c: TcpStream, registry: &Registry, refresh: &Refresh) -> std::io::Result<()> {
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
            Ok(Some((req, _))) => break Ok((req.method.to_string(), req.path.to_string())),
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
        Ok((m, _)) if m != "GET" && m != "HEAD" => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics only\n".into(),
        ),
        Ok((_, p)) if p != "/metrics" => ("404 Not Found", "text/plain", "GET /metrics\n".into()),
        Ok((m, _)) => {
            refresh(registry);
            let text = registry.render();
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
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
