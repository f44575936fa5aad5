//! An HTTP/1.x request head (RFC 9112 §2-§5), parsed as untrusted input: bytes in, a request,
//! "more bytes needed" or one error out. Sizes are bounded (the head, the number of headers)
//! before anything is kept, and nothing here touches a socket.

/// Largest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 8192;
/// Most header fields accepted.
pub const MAX_HEADERS: usize = 64;

/// A request head.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path without its query.
    pub path: &'a str,
    /// HTTP/1.0 or HTTP/1.1 (the minor version).
    pub minor: u8,
    /// The first `Accept` field's value, trimmed (the format is negotiated from it).
    pub accept: Option<&'a str>,
}

/// Why a request head was refused (the server answers 400 or 431 with this line).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("request head longer than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("more than {MAX_HEADERS} header fields")]
    TooManyHeaders,
    #[error("request head is not ASCII text")]
    NotText,
    #[error("bad request line")]
    RequestLine,
    #[error("unsupported HTTP version (1.0 and 1.1 only)")]
    Version,
    #[error("bad header field")]
    Header,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses the head at the start of `buf`: `Ok(None)` while it is incomplete (and within
/// bounds), else the request and the bytes its head took.
pub fn parse(buf: &[u8]) -> Result<Option<(Request<'_>, usize)>, HttpError> {
    let scan = &buf[..buf.len().min(MAX_HEAD)];
    let end = scan.windows(4).position(|w| w == b"\r\n\r\n");
    let Some(end) = end else {
        return if buf.len() >= MAX_HEAD {
            Err(HttpError::TooLarge)
        } else {
            Ok(None)
        };
    };
    let head = &buf[..end];
    if !head
        .iter()
        .all(|&b| b == b'\r' || b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return Err(HttpError::NotText);
    }
    // Checked above: ASCII only.
    let head = std::str::from_utf8(head).map_err(|_| HttpError::NotText)?;
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::RequestLine);
    };
    if !is_token(method) || !target.starts_with('/') {
        return Err(HttpError::RequestLine);
    }
    let minor = match version {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        v if v.starts_with("HTTP/") => return Err(HttpError::Version),
        _ => return Err(HttpError::RequestLine),
    };
    let mut n = 0;
    let mut accept = None;
    for l in lines {
        n += 1;
        if n > MAX_HEADERS {
            return Err(HttpError::TooManyHeaders);
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(HttpError::Header);
        };
        // No whitespace between a field name and its colon (RFC 9112 §5.1).
        if !is_token(name) || l.contains('\n') || l.contains('\r') {
            return Err(HttpError::Header);
        }
        if accept.is_none() && name.eq_ignore_ascii_case("accept") {
            accept = Some(value.trim_matches([' ', '\t']));
        }
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    Ok(Some((
        Request {
            method,
            path,
            minor,
            accept,
        },
        end + 4,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_parses() {
        let r = b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nACCEPT: \t text/plain \r\naccept: x\r\n\r\nrest";
        let (req, n) = parse(r).unwrap().unwrap();
        assert_eq!(
            req,
            Request {
                method: "GET",
                path: "/metrics",
                minor: 1,
                accept: Some("text/plain"),
            }
        );
        assert_eq!(&r[n..], b"rest");
    }

    #[test]
    fn incomplete_then_bounded() {
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        let big = vec![b'a'; MAX_HEAD];
        assert_eq!(parse(&big), Err(HttpError::TooLarge));
    }

    #[test]
    fn bad_heads_are_one_error_each() {
        let cases: [(&[u8], HttpError); 6] = [
            (b"GET /metrics\r\n\r\n", HttpError::RequestLine),
            (b"GET metrics HTTP/1.1\r\n\r\n", HttpError::RequestLine),
            (b"GET /metrics HTTP/2.0\r\n\r\n", HttpError::Version),
            (
                b"GET /metrics HTTP/1.1\r\nHost a\r\n\r\n",
                HttpError::Header,
            ),
            (
                b"GET /metrics HTTP/1.1\r\nHost : a\r\n\r\n",
                HttpError::Header,
            ),
            (b"GET /\xff HTTP/1.1\r\n\r\n", HttpError::NotText),
        ];
        for (bytes, e) in cases {
            assert_eq!(parse(bytes), Err(e), "{}", String::from_utf8_lossy(bytes));
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: y\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse(req.as_bytes()), Err(HttpError::TooManyHeaders));
    }
}
