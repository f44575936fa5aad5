//! Escaping, command lines and tables shared by the exporters; their numbers are
//! `sanbench_units::fmt`.

use sanbench_units::fmt::num;

/// Escapes text for HTML element content and quoted attribute values.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// JSON that is safe inside `<script type="application/json">`: `<`, `>`, `&` and the two
/// JavaScript line separators only occur inside strings, where `\uXXXX` means the same.
pub fn json_for_script(v: &serde_json::Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Escapes a Markdown table cell.
pub fn md_cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', " ")
}

/// One CSV field (RFC 4180): quoted when it holds a comma, quote or line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The command as a shell would take it back (POSIX single quotes where needed).
pub fn shell_command(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// "mean ± ci" when repeated, the mean alone otherwise, "–" when absent.
pub fn mean_ci(m: Option<&sanbench_stats::MeanCi>) -> String {
    match m {
        Some(m) if m.n > 1 && m.ci95 > 0.0 => format!("{} ± {}", num(m.mean), num(m.ci95)),
        Some(m) => num(m.mean),
        None => "–".into(),
    }
}

/// A plain-text table for the terminal: left-aligned columns as wide as their widest cell,
/// a dashed rule under the header, trailing spaces trimmed.
pub fn text_table<R: AsRef<[String]>>(header: &[String], rows: &[R]) -> String {
    use std::fmt::Write as _;
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r.as_ref()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    let mut line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(s, "{}", parts.join("  ").trim_end());
    };
    line(header);
    line(&widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>());
    for r in rows {
        line(r.as_ref());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(html("<a & 'b'>\""), "&lt;a &amp; &#39;b&#39;&gt;&quot;");
        let v = serde_json::json!({"n": "</script><b>&\u{2028}"});
        let s = json_for_script(&v);
        assert!(!s.contains('<') && !s.contains('&') && !s.contains('\u{2028}'));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(md_cell("a|<b>"), "a\\|&lt;b&gt;");
        let cmd: Vec<String> = ["sanbench", "NBD <ram> & co=nbd://x", "it's"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            shell_command(&cmd),
            "sanbench 'NBD <ram> & co=nbd://x' 'it'\\''s'"
        );
    }
}
