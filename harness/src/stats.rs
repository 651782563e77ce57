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

#[cfg(test)]
mod tests {
    use super::wilson95;

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
