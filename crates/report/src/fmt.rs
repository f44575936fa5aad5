//! Escaping, command lines and tables shared by the exporters, and the studies' forms of a
//! ratio and its interval ([`fmt_ratio`], [`fmt_interval`]) shared by the findings and the
//! questions; their numbers are `sanbench_units::fmt`.

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

/// Formats a ratio as the studies did: "3.9x", "10x"; two decimals when one would say "1.0x".
pub fn fmt_ratio(r: f64) -> String {
    if r >= 9.95 {
        format!("{r:.0}x")
    } else if r < 1.095 {
        format!("{r:.2}x")
    } else {
        format!("{r:.1}x")
    }
}

/// "[1.5-2.2]", "[<0.001->999]" when a few rounds leave it that wide, or "[unbounded]" while
/// the rounds cannot bound it. A bound near 1 gets the digits that keep it on its side of 1:
/// whether an interval holds 1 is the verdict, so 1.0027 is "1.003", never "1.00", and 0.9996
/// "0.9996".
pub fn fmt_interval(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(l), Some(h)) => format!("[{}-{}]", fmt_bound(l), fmt_bound(h)),
        _ => "[unbounded]".into(),
    }
}

/// One bound of [`fmt_interval`].
fn fmt_bound(x: f64) -> String {
    // Two or three rounds can leave an average's interval astronomically wide: say so rather
    // than print 2.8e78.
    if x > 999.0 {
        ">999".to_string()
    } else if x < 0.001 {
        "<0.001".to_string()
    } else if x >= 9.95 {
        format!("{x:.0}")
    } else if x < 1.095 {
        // As many decimals (2 to 4) as keep the printed bound on the same side of 1.
        let side = |v: f64| v.partial_cmp(&1.0);
        (2..=4)
            .map(|d| format!("{x:.d$}"))
            .find(|t| t.parse::<f64>().is_ok_and(|v| side(v) == side(x)))
            .unwrap_or_else(|| {
                // Closer still: 4 decimals rounded away from 1.
                let r = if x < 1.0 { f64::floor } else { f64::ceil };
                format!("{:.4}", r(x * 1e4) / 1e4)
            })
    } else {
        format!("{x:.1}")
    }
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
