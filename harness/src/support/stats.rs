//! Pass rates with a confidence interval, so "3 of 5" reads as what it is.

/// The Wilson score interval for `successes` out of `n`, at 95 %.
/// Returns (low, high) in [0, 1]; (0, 1) when there were no runs.
pub fn wilson95(successes: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    const Z: f64 = 1.959_963_984_540_054;
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = Z * Z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((center - half).max(0.0), (center + half).min(1.0))
}

/// The exact one-sided 95 % upper bound (Clopper–Pearson) of a rate seen
/// `k` times in `n` trials: the p at which seeing k or fewer has chance 5 %.
/// 1 when there were no trials or every trial counted.
pub fn clopper_pearson_upper95(k: u64, n: u64) -> f64 {
    if n == 0 || k >= n {
        return 1.0;
    }
    if k == 0 {
        return 1.0 - 0.05f64.powf(1.0 / n as f64);
    }
    // P(X ≤ k) falls as p grows: bisect for where it crosses 5 %.
    let (mut lo, mut hi) = (k as f64 / n as f64, 1.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if binomial_cdf(k, n, mid) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// P(X ≤ k) for X ~ Binomial(n, p), summed in logs so that large n stays
/// finite.
fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    // ln C(n, i), built up term by term.
    let mut ln_choose = 0.0;
    let mut sum = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        sum += (ln_choose + i as f64 * lp + (n - i) as f64 * lq).exp();
    }
    sum.min(1.0)
}

/// The share of `n` runs that passed; 0 without runs.
pub fn pass_rate(passed: u64, n: u64) -> f64 {
    match n {
        0 => 0.0,
        n => passed as f64 / n as f64,
    }
}

/// The 95 % Wilson interval of the pass rate, rounded to three places as the results file
/// holds it.
pub fn pass_rate_95(passed: u64, n: u64) -> [f64; 2] {
    let (lo, hi) = wilson95(passed, n);
    [round3(lo), round3(hi)]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::{clopper_pearson_upper95, wilson95};

    #[test]
    fn exact_upper_bounds() {
        // 0 of n: 1 − 0.05^(1/n); the "rule of three" 3/n for large n.
        assert!((clopper_pearson_upper95(0, 299) - 0.009970).abs() < 1e-5);
        assert!(clopper_pearson_upper95(0, 298) >= 0.01);
        // 1 of 10: the 95 % one-sided bound is 0.3942 (tables).
        assert!((clopper_pearson_upper95(1, 10) - 0.3942).abs() < 1e-3);
        // 5 of 100: 0.1024.
        assert!((clopper_pearson_upper95(5, 100) - 0.1024).abs() < 1e-3);
        assert_eq!(clopper_pearson_upper95(3, 3), 1.0);
        assert_eq!(clopper_pearson_upper95(0, 0), 1.0);
    }

    #[test]
    fn known_values() {
        // 0 of 20: the upper bound is the "rule of three"-like 16.1 %.
        let (lo, hi) = wilson95(0, 20);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.1611).abs() < 1e-3, "{hi}");
        // 3 of 5 (the unpatched Jetson): 23.1 % .. 88.2 %.
        let (lo, hi) = wilson95(3, 5);
        assert!((lo - 0.2307).abs() < 1e-3, "{lo}");
        assert!((hi - 0.8824).abs() < 1e-3, "{hi}");
        let (lo, hi) = wilson95(20, 20);
        assert!((lo - 0.8389).abs() < 1e-3, "{lo}");
        assert_eq!(hi, 1.0);
    }

    #[test]
    fn no_runs_means_no_knowledge() {
        assert_eq!(wilson95(0, 0), (0.0, 1.0));
    }
}
