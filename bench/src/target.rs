//! A benchmark target and how a measured spread is judged against it.
//!
//! Invariant: a target counts as met only when every round meets it (the whole
//! min–max spread is on the right side), as missed only when no round meets
//! it, and as "within noise" when the spread straddles it; a figure with no
//! rounds is never judged met.

use crate::stats::Spread;
use crate::table::Verdict;

/// A bound on a figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The figure must be at least this.
    AtLeast(f64),
    /// The figure must be at most this.
    AtMost(f64),
}

impl Target {
    fn ok(self, x: f64) -> bool {
        match self {
            Target::AtLeast(t) => x >= t,
            Target::AtMost(t) => x <= t,
        }
    }

    /// The verdict on `spread` (`None`: nothing measured).
    pub fn judge(self, spread: Option<&Spread>) -> Verdict {
        let Some(s) = spread else {
            return Verdict::Failed;
        };
        match (self.ok(s.min), self.ok(s.max)) {
            (true, true) => Verdict::Met,
            (false, false) => Verdict::Missed,
            _ => Verdict::WithinNoise,
        }
    }
}

/// The verdict on several targets that must all hold: missed if any is
/// missed, met if all are met, else within noise.
pub fn all(verdicts: &[Verdict]) -> Verdict {
    if verdicts.contains(&Verdict::Failed) {
        Verdict::Failed
    } else if verdicts.contains(&Verdict::Missed) {
        Verdict::Missed
    } else if verdicts.iter().all(|v| *v == Verdict::Met) {
        Verdict::Met
    } else {
        Verdict::WithinNoise
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(min: f64, max: f64) -> Spread {
        Spread {
            median: (min + max) / 2.0,
            min,
            max,
            n: 7,
        }
    }

    #[test]
    fn met_only_when_the_whole_spread_meets_it() {
        let t = Target::AtLeast(1.5);
        assert_eq!(t.judge(Some(&s(1.6, 1.9))), Verdict::Met);
        assert_eq!(t.judge(Some(&s(1.37, 1.77))), Verdict::WithinNoise);
        assert_eq!(t.judge(Some(&s(0.9, 1.2))), Verdict::Missed);
        assert_eq!(t.judge(None), Verdict::Failed);
        assert_eq!(Target::AtMost(0.5).judge(Some(&s(0.2, 0.4))), Verdict::Met);
        assert_eq!(
            all(&[Verdict::Met, Verdict::WithinNoise]),
            Verdict::WithinNoise
        );
        assert_eq!(all(&[Verdict::Met, Verdict::Missed]), Verdict::Missed);
        assert_eq!(all(&[Verdict::Met, Verdict::Met]), Verdict::Met);
    }
}
