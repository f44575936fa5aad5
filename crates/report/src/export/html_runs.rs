//! The "Earlier runs" section of report.html: earlier runs of the same suite and targets from
//! the results store, and per finding of this run whether each agreed
//! ([`crate::replication`]). Only a report rendered with a store has it.

use std::fmt::Write as _;

use crate::fmt::html as esc;
use crate::replication::{Outcome, Row};
use crate::Report;

fn outcome_cell(row: &Row, s: &mut String) {
    let label = if row.note.is_empty() {
        row.outcome.label().to_string()
    } else {
        format!("{} ({})", row.outcome.label(), row.note)
    };
    let _ = write!(
        s,
        "<td class=\"name outcome-{}\" title=\"there: {}\">{}</td>",
        serde_json::to_value(row.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        esc(&row.in_b),
        esc(&label)
    );
}

pub fn earlier(r: &Report, s: &mut String) {
    let Some(first) = r.earlier.first() else {
        return;
    };
    let _ = write!(
        s,
        "<section id=\"earlier-runs\"><h2>Earlier runs</h2>\n<p class=\"note\">Earlier complete \
         runs of suite {} with the same targets, from the results store, newest first. Per \
         finding of this run: <b>reproduced</b> (the same verdict in the same direction, the \
         intervals overlap), <b>inconclusive</b> (asked, nothing decided), <b>reversed</b> \
         (the opposite direction decided), <b>differs</b> (another verdict, or intervals apart) \
         or not compared. <code>sanbench diff RUN_A RUN_B</code> gives the whole table.</p>\n\
         <div class=\"scroll\"><table><thead><tr><th class=\"name\">Finding of this run</th>",
        esc(&r.cmp.suite)
    );
    for e in &r.earlier {
        let _ = write!(
            s,
            "<th class=\"name\" data-run=\"{}\">Run {}<br><span class=\"note\">{}</span></th>",
            esc(&e.run),
            esc(&e.run),
            esc(&e.started_at)
        );
    }
    s.push_str("</tr></thead><tbody>\n");
    let findings = |rows: &[Row]| -> Vec<Row> {
        rows.iter()
            .filter(|x| x.kind == "finding")
            .cloned()
            .collect()
    };
    let per_run: Vec<Vec<Row>> = r
        .earlier
        .iter()
        .map(|e| findings(&e.replication.rows))
        .collect();
    let ours = findings(&first.replication.rows);
    if ours.is_empty() {
        let _ = writeln!(
            s,
            "<tr><td class=\"name\" colspan=\"{}\">This run has no findings.</td></tr>",
            r.earlier.len() + 1
        );
    }
    for (i, row) in ours.iter().enumerate() {
        let _ = write!(
            s,
            "<tr class=\"finding\"><td class=\"name\">{}: {}</td>",
            esc(&row.claim),
            esc(&row.in_a)
        );
        for rows in &per_run {
            match rows.get(i) {
                Some(x) => outcome_cell(x, s),
                None => s.push_str("<td></td>"),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("<tr><td class=\"name\">Decided throughput questions reproduced</td>");
    for e in &r.earlier {
        let qs: Vec<&Row> = e
            .replication
            .rows
            .iter()
            .filter(|x| x.kind == "question")
            .collect();
        let _ = write!(
            s,
            "<td class=\"name\">{} of {} ({} reversed)</td>",
            qs.iter()
                .filter(|x| x.outcome == Outcome::Reproduced)
                .count(),
            qs.len(),
            qs.iter().filter(|x| x.outcome == Outcome::Reversed).count()
        );
    }
    s.push_str("</tr>\n<tr><td class=\"name\">Findings there that this run lacks</td>");
    for e in &r.earlier {
        let _ = write!(
            s,
            "<td class=\"name\" title=\"{}\">{}</td>",
            esc(&e.replication.only_in_b.join("\n")),
            e.replication.only_in_b.len()
        );
    }
    s.push_str("</tr>\n</tbody></table></div></section>\n");
}
