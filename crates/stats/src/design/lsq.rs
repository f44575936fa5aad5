//! Least squares for the analysis's small linear models (a pair's differences on carry-over
//! indicators; a workload's cells on round, target and carry-over), by modified Gram-Schmidt:
//! a column that the earlier ones already span is left out (its effect is not estimable from
//! this design), which is how a model too rich for the rounds run so far degrades.

/// A fit: per column its coefficient (`None`: not estimable, left out), the residual sum of
/// squares, the number of columns kept, and the last kept column's variance factor (its
/// coefficient's variance is `σ² · last_var`).
#[derive(Clone, Debug, PartialEq)]
pub struct Lsq {
    pub coef: Vec<Option<f64>>,
    pub rss: f64,
    pub rank: usize,
    pub last_var: f64,
    /// Per row: the residual and the leverage (the diagonal of the hat matrix).
    pub resid: Vec<f64>,
    pub lev: Vec<f64>,
    /// The last kept column's coefficient as a weighted sum of `y`: these weights.
    pub last_weights: Vec<f64>,
}

/// Fits `y ~ cols` (each column as long as `y`).
pub fn lsq(cols: &[Vec<f64>], y: &[f64]) -> Lsq {
    let mut q: Vec<Vec<f64>> = Vec::new();
    // Per kept column: its index and its row of R (against the kept columns before it).
    let mut kept: Vec<(usize, Vec<f64>, f64)> = Vec::new();
    for (k, c) in cols.iter().enumerate() {
        let scale = c.iter().map(|v| v * v).sum::<f64>().sqrt();
        if scale == 0.0 {
            continue;
        }
        let mut v = c.clone();
        let mut r = Vec::with_capacity(q.len());
        for qi in &q {
            let p: f64 = qi.iter().zip(&v).map(|(a, b)| a * b).sum();
            for (vv, qq) in v.iter_mut().zip(qi) {
                *vv -= p * qq;
            }
            r.push(p);
        }
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm <= 1e-9 * scale {
            continue;
        }
        v.iter_mut().for_each(|x| *x /= norm);
        q.push(v);
        kept.push((k, r, norm));
    }
    let mut resid = y.to_vec();
    let mut z = Vec::with_capacity(q.len());
    for qi in &q {
        let p: f64 = qi.iter().zip(&resid).map(|(a, b)| a * b).sum();
        for (rr, qq) in resid.iter_mut().zip(qi) {
            *rr -= p * qq;
        }
        z.push(p);
    }
    // Back substitution: R c = z, R upper triangular with `kept[i].2` on the diagonal.
    let m = kept.len();
    let mut c = vec![0.0; m];
    for i in (0..m).rev() {
        let mut s = z[i];
        for (j, cj) in c.iter().enumerate().skip(i + 1) {
            s -= kept[j].1[i] * cj;
        }
        c[i] = s / kept[i].2;
    }
    let mut lev = vec![0.0; y.len()];
    for qi in &q {
        for (l, v) in lev.iter_mut().zip(qi) {
            *l += v * v;
        }
    }
    let last_weights = match (q.last(), kept.last()) {
        (Some(ql), Some(k)) => ql.iter().map(|v| v / k.2).collect(),
        _ => vec![0.0; y.len()],
    };
    let mut coef = vec![None; cols.len()];
    for (i, (k, _, _)) in kept.iter().enumerate() {
        coef[*k] = Some(c[i]);
    }
    Lsq {
        coef,
        rss: resid.iter().map(|r| r * r).sum(),
        rank: m,
        last_var: kept.last().map_or(f64::INFINITY, |k| 1.0 / (k.2 * k.2)),
        resid,
        lev,
        last_weights,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_coefficients_and_drops_a_dependent_column() {
        let x1: Vec<f64> = (0..8).map(|i| i as f64).collect();
        let x2: Vec<f64> = (0..8).map(|i| ((i * 5) % 3) as f64).collect();
        let dup: Vec<f64> = x1.iter().map(|v| 2.0 * v).collect();
        let one = vec![1.0; 8];
        let y: Vec<f64> = (0..8).map(|i| 3.0 + 0.5 * x1[i] - 2.0 * x2[i]).collect();
        let f = lsq(&[x1, dup, x2, one], &y);
        assert_eq!(f.rank, 3);
        assert_eq!(f.coef[1], None);
        assert!((f.coef[0].unwrap() - 0.5).abs() < 1e-9);
        assert!((f.coef[2].unwrap() + 2.0).abs() < 1e-9);
        assert!((f.coef[3].unwrap() - 3.0).abs() < 1e-9);
        assert!(f.rss < 1e-18);
        // The intercept's weights reproduce its coefficient.
        let c: f64 = f.last_weights.iter().zip(&y).map(|(w, v)| w * v).sum();
        assert!((c - 3.0).abs() < 1e-9);
        assert!((f.lev.iter().sum::<f64>() - 3.0).abs() < 1e-9);
        // The intercept alone: its variance factor is 1/n.
        let g = lsq(&[vec![1.0; 8]], &y);
        assert!((g.last_var - 1.0 / 8.0).abs() < 1e-12);
    }
}
