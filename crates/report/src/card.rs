//! The interactive report card, after Network Computing's (2003): per category a score for each
//! target, normalised so the best target scores 100, and a weighted total that the reader can
//! re-weight in the page.
//!
//! A category's score: on each of its workloads the target's mean is divided by the best
//! target's (the best's by the target's for latency) × 100; those are averaged over the
//! workloads the target ran; the averages are scaled so the best target has 100. A category
//! counts in the total only when every target has a score in it (a target whose power was not
//! measured is not silently ranked on the others). Total = Σ weight × score ÷ Σ weight over the
//! counted categories; grade A ≥ 90, B ≥ 80, C ≥ 70, D ≥ 60, else F. The page's script repeats
//! exactly this arithmetic on the embedded scores.
//!
//! Reference targets (ceilings such as an in-process RAM disk) are not graded: the best among
//! the graded targets sets 100, and a reference is shown beside them with its score on the same
//! scale (often above 100), as the NWC card graded the products under review.

use std::collections::BTreeMap;

use serde::Serialize;

use sanbench_doc::Comparison;

use crate::analysis::{flavour, Analysis, Category};

/// Default weights (percent), in [`Category::ALL`] order.
pub const DEFAULT_WEIGHTS: [f64; 5] = [25.0, 25.0, 20.0, 15.0, 15.0];

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CardCategory {
    pub key: &'static str,
    pub title: &'static str,
    /// Every target has a score in this category, so it counts in the total.
    pub available: bool,
    pub weight: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CardRow {
    pub target: String,
    /// Score per category key; absent where the target has no data.
    pub scores: BTreeMap<&'static str, f64>,
    pub total: f64,
    pub grade: char,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Card {
    pub categories: Vec<CardCategory>,
    /// The graded targets, ranked by total, best first (ties by name).
    pub rows: Vec<CardRow>,
    /// Reference targets on the same scale, ungraded (grade '-'), in comparison order.
    pub references: Vec<CardRow>,
}

pub fn grade(total: f64) -> char {
    match total {
        t if t >= 90.0 => 'A',
        t if t >= 80.0 => 'B',
        t if t >= 70.0 => 'C',
        t if t >= 60.0 => 'D',
        _ => 'F',
    }
}

/// Scores of every target in one category (absent: no data), on the scale where the best graded
/// (non-reference) target scores 100.
fn category_scores(cmp: &Comparison, an: &Analysis, cat: Category) -> BTreeMap<String, f64> {
    let graded = |t: &str| cmp.targets.iter().any(|x| x.name == t && !x.reference);
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let judged: Vec<_> = cmp
        .workloads
        .iter()
        .filter(|w| cat.metric(flavour(w)).is_some())
        .collect();
    for w in judged {
        let Some(m) = cat.metric(flavour(w)) else {
            continue;
        };
        let vals: Vec<(&str, f64)> = cmp
            .targets
            .iter()
            .filter_map(|t| Some((t.name.as_str(), an.metric(&w.id, &t.name, m)?.mean)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        let graded_vals = vals.iter().filter(|v| graded(v.0)).map(|v| v.1);
        let best = if m.lower_is_better() {
            graded_vals
                .filter(|v| *v > 0.0)
                .fold(f64::INFINITY, f64::min)
        } else {
            graded_vals.fold(0.0, f64::max)
        };
        if !best.is_finite() || best <= 0.0 {
            continue;
        }
        for (t, v) in vals {
            let s = if m.lower_is_better() {
                if v > 0.0 {
                    best / v * 100.0
                } else {
                    continue;
                }
            } else {
                v / best * 100.0
            };
            let e = sums.entry(t.to_string()).or_insert((0.0, 0));
            e.0 += s;
            e.1 += 1;
        }
    }
    let avg: BTreeMap<String, f64> = sums
        .into_iter()
        .map(|(t, (s, n))| (t, s / n as f64))
        .collect();
    let top = avg
        .iter()
        .filter(|(t, _)| graded(t))
        .map(|(_, s)| *s)
        .fold(0.0, f64::max);
    avg.into_iter()
        .map(|(t, s)| (t, if top > 0.0 { s / top * 100.0 } else { 0.0 }))
        .collect()
}

/// Ranks rows by their weighted total; the same rule as the page's script.
pub fn rank(categories: &[CardCategory], rows: &mut [CardRow]) {
    for row in rows.iter_mut() {
        let (mut sum, mut wsum) = (0.0, 0.0);
        for c in categories.iter().filter(|c| c.available && c.weight > 0.0) {
            sum += c.weight * row.scores.get(c.key).copied().unwrap_or(0.0);
            wsum += c.weight;
        }
        row.total = if wsum > 0.0 { sum / wsum } else { 0.0 };
        row.grade = grade(row.total);
    }
    rows.sort_by(|a, b| {
        b.total
            .total_cmp(&a.total)
            .then_with(|| a.target.cmp(&b.target))
    });
}

/// The card with the given weights (in [`Category::ALL`] order; negative or NaN count as 0).
pub fn card(cmp: &Comparison, an: &Analysis, weights: &[f64; 5]) -> Card {
    let mut per_cat = Vec::new();
    let mut categories = Vec::new();
    for (i, cat) in Category::ALL.into_iter().enumerate() {
        let scores = category_scores(cmp, an, cat);
        let mut graded = cmp.targets.iter().filter(|t| !t.reference).peekable();
        let available = graded.peek().is_some() && graded.all(|t| scores.contains_key(&t.name));
        let w = weights[i];
        categories.push(CardCategory {
            key: cat.key(),
            title: cat.title(),
            available,
            weight: if w.is_finite() && w > 0.0 { w } else { 0.0 },
        });
        per_cat.push((cat.key(), scores));
    }
    let row = |t: &sanbench_doc::TargetEntry| CardRow {
        target: t.name.clone(),
        scores: per_cat
            .iter()
            .filter_map(|(k, s)| Some((*k, *s.get(&t.name)?)))
            .collect(),
        total: 0.0,
        grade: 'F',
    };
    let mut rows: Vec<CardRow> = cmp
        .targets
        .iter()
        .filter(|t| !t.reference)
        .map(row)
        .collect();
    rank(&categories, &mut rows);
    let mut references: Vec<CardRow> = cmp
        .targets
        .iter()
        .filter(|t| t.reference)
        .map(row)
        .collect();
    for r in &mut references {
        // The same total as a graded row, without a grade or a place in the ranking.
        rank(&categories, std::slice::from_mut(r));
        r.grade = '-';
    }
    Card {
        categories,
        rows,
        references,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanbench_store::fixture::sample_comparison;

    #[test]
    fn best_scores_100_and_weights_rerank() {
        let cmp = sample_comparison();
        let an = Analysis::new(&cmp);
        let c = card(&cmp, &an, &DEFAULT_WEIGHTS);
        assert!(c.categories.iter().all(|c| c.available));
        for cat in &c.categories {
            let top = c.rows.iter().map(|r| r.scores[cat.key]).fold(0.0, f64::max);
            assert!((top - 100.0).abs() < 1e-9, "{}", cat.key);
        }
        // Only CPU efficiency: FC (4 % CPU for 744 MB/s) wins.
        let c = card(&cmp, &an, &[0.0, 0.0, 0.0, 1.0, 0.0]);
        assert_eq!(c.rows[0].target, "FC 8G");
        assert_eq!(c.rows[0].grade, 'A');
        // Only bandwidth: the NBD RAM disk wins.
        let c = card(&cmp, &an, &[1.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(c.rows[0].target, "NBD <ram> & co");
        // No weight at all: everyone 0, by name.
        let c = card(&cmp, &an, &[0.0; 5]);
        assert!(c.rows.iter().all(|r| r.total == 0.0 && r.grade == 'F'));
        assert_eq!(c.rows[0].target, "FC 8G");
    }

    #[test]
    fn references_are_shown_on_the_scale_but_not_graded() {
        let mut cmp = sample_comparison();
        // NBD has the best bandwidth; as a reference it no longer sets the scale.
        cmp.targets[2].reference = true;
        let an = Analysis::new(&cmp);
        let c = card(&cmp, &an, &[1.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(c.rows.len(), 2);
        assert!(c.rows.iter().all(|r| r.target != "NBD <ram> & co"));
        assert!((c.rows[0].scores["bandwidth"] - 100.0).abs() < 1e-9);
        assert_eq!(c.references.len(), 1);
        let r = &c.references[0];
        assert_eq!((r.target.as_str(), r.grade), ("NBD <ram> & co", '-'));
        assert!(r.scores["bandwidth"] > 100.0, "{r:?}");
    }

    #[test]
    fn missing_category_is_not_counted() {
        let mut cmp = sample_comparison();
        for cell in cmp.cells.iter_mut().filter(|c| c.target == "FC 8G") {
            cell.result.efficiency.iops_per_watt = None;
            cell.result.efficiency.mb_per_s_per_watt = None;
        }
        let an = Analysis::new(&cmp);
        let c = card(&cmp, &an, &[0.0, 0.0, 0.0, 0.0, 1.0]);
        assert!(!c.categories[4].available);
        assert!(c.rows.iter().all(|r| r.total == 0.0));
        assert_eq!(grade(90.0), 'A');
        assert_eq!(grade(59.9), 'F');
        assert_eq!(grade(f64::NAN), 'F');
    }
}
