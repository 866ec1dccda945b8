//! Small statistics used in the tables: medians, percentiles, and the spread
//! of a figure across rounds (median with min–max), including the spread of a
//! ratio taken round by round.
//!
//! Invariant: empty input yields `None`, never a made-up number; a ratio's
//! spread pairs values of the same round only.

/// Median of `xs` (mean of the two middle values for an even count).
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The `q` quantile (0..=1) of `xs`, nearest rank.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// A figure over the rounds: median, min and max, and how many rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// The spread of `xs` (one value per round).
    pub fn of(xs: &[f64]) -> Option<Spread> {
        let median = median(xs)?;
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            median,
            min,
            max,
            n: xs.len(),
        })
    }

    /// The spread of `a[i] / b[i]`: the ratio of each round, so that a slow
    /// round of one side is compared with the same round of the other.
    pub fn ratio(a: &[f64], b: &[f64]) -> Option<Spread> {
        Self::pairwise(a, b, |x, y| x / y)
    }

    /// The spread of `f(a[i], b[i])`, round by round; rounds where `f` is not
    /// finite are left out.
    pub fn pairwise(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Option<Spread> {
        let xs: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| f(*x, *y))
            .filter(|r| r.is_finite())
            .collect();
        Self::of(&xs)
    }

    /// `median [min–max]`, each formatted by `f`.
    pub fn show(&self, f: impl Fn(f64) -> String) -> String {
        if self.n <= 1 {
            return f(self.median);
        }
        format!("{} [{}–{}]", f(self.median), f(self.min), f(self.max))
    }

    /// `median` formatted by `f`, then ` [min–max]` formatted by `g`.
    fn show2(&self, f: impl Fn(f64) -> String, g: impl Fn(f64) -> String) -> String {
        if self.n <= 1 {
            return f(self.median);
        }
        format!("{} [{}–{}]", f(self.median), g(self.min), g(self.max))
    }

    /// A ratio: `1.56x [1.37–1.77]`.
    pub fn times(&self) -> String {
        self.show2(|x| format!("{x:.2}x"), |x| format!("{x:.2}"))
    }

    /// A share: `95% [91–99]`.
    pub fn percent(&self) -> String {
        self.show2(
            |x| format!("{:.0}%", x * 100.0),
            |x| format!("{:.0}", x * 100.0),
        )
    }
}

/// `median [min–max] unit` of `xs` with `decimals` decimals, or `-` when
/// empty: `156 [145–167] ms`.
pub fn show_in(xs: &[f64], decimals: usize, unit: &str) -> String {
    match Spread::of(xs) {
        None => "-".into(),
        Some(s) => format!("{} {unit}", s.show(|x| format!("{x:.decimals$}"))),
    }
}

/// `median [min–max]` of `xs` formatted by `f`, or `-` when empty.
pub fn show(xs: &[f64], f: impl Fn(f64) -> String) -> String {
    Spread::of(xs).map_or_else(|| "-".into(), |s| s.show(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quantiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&xs, 0.99), Some(99.0));
        assert_eq!(quantile(&xs, 1.0), Some(100.0));
        assert_eq!(quantile(&xs, 0.5), Some(50.0));
    }

    #[test]
    fn ratio_spread_pairs_rounds() {
        let s = Spread::ratio(&[2.0, 3.0, 8.0], &[1.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.5, 2.0, 3));
        assert_eq!(s.times(), "2.00x [1.50–2.00]");
        assert_eq!(Spread::ratio(&[1.0], &[0.0]), None);
        assert_eq!(show(&[], |x| x.to_string()), "-");
        assert_eq!(show_in(&[145.0, 156.0, 167.0], 0, "ms"), "156 [145–167] ms");
    }
}
