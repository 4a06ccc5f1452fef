//! The arithmetic of a scale run: percentiles of latencies and the fitted growth exponent of a
//! cost (the slope of log cost against log size: 1 is linear, 2 quadratic).

use std::time::Duration;

/// The `p`-th percentile (0–100) by nearest rank; `None` for no samples.
pub fn percentile(samples: &[Duration], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s.get(rank.clamp(1, s.len()) - 1).copied()
}

/// Least-squares slope of `ln y` over `ln x` for the points with both positive; `None` with
/// fewer than two such points or one size only.
pub fn growth_exponent(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    if logs.len() < 2 {
        return None;
    }
    let n = logs.len() as f64;
    let mx = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&s, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&s, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&s, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(
            percentile(&[Duration::from_millis(7)], 99.0),
            Some(Duration::from_millis(7))
        );
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn exponents_of_known_growths() {
        let linear: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0].iter().map(|x| (*x, 3.0 * x)).collect();
        assert!((growth_exponent(&linear).unwrap_or(0.0) - 1.0).abs() < 1e-9);
        let quad: Vec<(f64, f64)> = [10.0, 20.0, 40.0].iter().map(|x| (*x, x * x)).collect();
        assert!((growth_exponent(&quad).unwrap_or(0.0) - 2.0).abs() < 1e-9);
        assert_eq!(growth_exponent(&[(1.0, 1.0)]), None);
        assert_eq!(growth_exponent(&[(5.0, 1.0), (5.0, 2.0)]), None);
    }
}
