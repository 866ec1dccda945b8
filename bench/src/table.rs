//! The results table: one row per measured quantity, rendered as Markdown for
//! `docs/BENCHMARKS.md` and the console.
//!
//! Invariant: a row that could not be measured says so (`Failed`) with the
//! reason; it never shows a number it did not measure. Figures are medians
//! over the rounds with their min–max in brackets.

use serde::Serialize;

/// Whether a row meets its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Target met in every round.
    Met,
    /// Target missed in every round.
    Missed,
    /// Some rounds meet the target and some do not.
    WithinNoise,
    /// No target on this row (context only).
    Info,
    /// The measurement failed.
    Failed,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "**missed**",
            Verdict::WithinNoise => "within noise",
            Verdict::Info => "",
            Verdict::Failed => "**failed**",
        }
    }
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// B1, B2, ...
    pub id: &'static str,
    /// What the row measures.
    pub what: String,
    /// wasm-informer's value.
    pub ours: String,
    /// kube-runtime's value.
    pub peer: String,
    /// Ratio or derived figure compared with the target.
    pub ratio: String,
    /// The target.
    pub target: String,
    /// Verdict.
    pub verdict: Verdict,
    /// How it was measured, and anything odd.
    pub note: String,
}

impl Row {
    /// A row for a benchmark that could not run.
    pub fn failed(id: &'static str, what: &str, target: &str, err: &anyhow::Error) -> Row {
        Row {
            id,
            what: what.to_string(),
            ours: "-".into(),
            peer: "-".into(),
            ratio: "-".into(),
            target: target.to_string(),
            verdict: Verdict::Failed,
            note: format!("{err:#}").replace('\n', " "),
        }
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The table in Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| id | measure | wasm-informer | kube-runtime | ratio / result | target | verdict |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.id,
            cell(&r.what),
            cell(&r.ours),
            cell(&r.peer),
            cell(&r.ratio),
            cell(&r.target),
            r.verdict.as_str()
        ));
    }
    s
}

/// Notes of every row, as a numbered Markdown list keyed by row.
pub fn notes(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        s.push_str(&format!("- **{} {}**: {}\n", r.id, r.what, r.note));
    }
    s
}

/// Formats a byte count.
pub fn bytes(b: f64) -> String {
    if b.abs() >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b.abs() >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b.abs() >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_rows_and_escapes_pipes() {
        let rows = vec![Row {
            id: "B1",
            what: "a|b".into(),
            ours: "1".into(),
            peer: "2".into(),
            ratio: "0.5x".into(),
            target: ">= 1.5x".into(),
            verdict: Verdict::Missed,
            note: "n".into(),
        }];
        let md = markdown(&rows);
        assert!(md.contains("| B1 | a\\|b | 1 | 2 | 0.5x | >= 1.5x | **missed** |"));
        assert!(notes(&rows).contains("**B1 a|b**: n"));
        assert_eq!(bytes(2_500_000.0), "2.5 MB");
    }
}
