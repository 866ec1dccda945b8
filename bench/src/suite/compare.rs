//! A comparison row: one value per round for each of two arms, shown as
//! median [min–max], and their ratio taken round by round, judged against a
//! target when the row has one.
//!
//! Invariant: the ratio's spread pairs values of the same round; the verdict
//! follows `target::Target::judge` (met only when every round meets it), and a
//! row without a target is `Info`.

use crate::stats::{show, Spread};
use crate::table::{Row, Verdict};
use crate::target::Target;

/// What a comparison row needs.
pub struct Compare<'a> {
    /// Benchmark id.
    pub id: &'static str,
    /// What the row measures.
    pub what: String,
    /// Our arm's value per round.
    pub ours: &'a [f64],
    /// The peer arm's value per round.
    pub peer: &'a [f64],
    /// How one value is written.
    pub unit: fn(f64) -> String,
    /// The bound on ours / peer, with how the table writes it.
    pub target: Option<(Target, &'static str)>,
    /// How each side was configured, and anything odd.
    pub note: String,
}

impl Compare<'_> {
    /// The table row.
    pub fn row(self) -> Row {
        let ratio = Spread::ratio(self.ours, self.peer);
        let per_round: Vec<String> = self
            .ours
            .iter()
            .zip(self.peer)
            .map(|(o, p)| format!("{:.2}", o / p))
            .collect();
        let (target, verdict) = match self.target {
            Some((t, text)) => (text.to_string(), t.judge(ratio.as_ref())),
            None => ("-".to_string(), Verdict::Info),
        };
        Row {
            id: self.id,
            what: self.what,
            ours: show(self.ours, self.unit),
            peer: show(self.peer, self.unit),
            ratio: ratio.map_or_else(|| "-".into(), |r| r.times()),
            target,
            verdict,
            note: format!(
                "{} Ratio per round (ABBA order): [{}].",
                self.note.trim_end(),
                per_round.join(", ")
            ),
        }
    }
}

/// A value with no decimals: `52025`.
pub fn whole(x: f64) -> String {
    format!("{x:.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_the_spread_of_the_per_round_ratio() {
        let r = Compare {
            id: "B1",
            what: "w".into(),
            ours: &[3.0, 4.0],
            peer: &[2.0, 2.0],
            unit: whole,
            target: Some((Target::AtLeast(1.5), ">= 1.5x")),
            note: "n".into(),
        }
        .row();
        assert_eq!(r.ours, "4 [3–4]");
        assert_eq!(r.ratio, "1.75x [1.50–2.00]");
        assert_eq!(r.verdict, Verdict::Met);
        assert!(r.note.ends_with("[1.50, 2.00]."), "{}", r.note);
    }
}
