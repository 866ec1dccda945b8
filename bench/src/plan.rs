//! Sizes and repetitions of every benchmark, for the quick (smoke) and the full
//! mode.
//!
//! Invariant: the full plan is the specification (20k pods for B1/B4,
//! 50k for B5, 5k replayed for B6, 50 handlers over 10k pods for B7, 200k pods
//! with 10 plugins at 5k events/s for a minute for B8).

/// Which plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Small sizes, one round: finishes in under a minute.
    Quick,
    /// The real sizes, alternating rounds.
    Full,
}

/// All sizes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    /// Alternating A/B rounds per comparison.
    pub rounds: usize,
    pub b1_pods: usize,
    pub b1_events: usize,
    pub b2_pods: usize,
    pub b2_events: usize,
    pub b2_plugins: Vec<usize>,
    pub b3_rounds: usize,
    pub b3_pods: usize,
    pub b3_rate: f64,
    pub b3_secs: u64,
    pub b3_grace_secs: u64,
    pub b4_pods: usize,
    pub b5_pods: usize,
    pub b6_objects: usize,
    pub b7_pods: usize,
    pub b7_handlers: usize,
    pub b8_pods: usize,
    pub b8_plugins: usize,
    pub b8_rate: f64,
    pub b8_secs: u64,
}

impl Plan {
    /// The plan for `mode`.
    pub fn new(mode: Mode) -> Plan {
        match mode {
            Mode::Quick => Plan {
                mode,
                rounds: 1,
                b1_pods: 500,
                b1_events: 500,
                b2_pods: 300,
                b2_events: 300,
                b2_plugins: vec![1, 4, 16],
                b3_rounds: 1,
                b3_pods: 100,
                b3_rate: 200.0,
                b3_secs: 2,
                b3_grace_secs: 1,
                b4_pods: 500,
                b5_pods: 1000,
                b6_objects: 200,
                b7_pods: 300,
                b7_handlers: 10,
                b8_pods: 1000,
                b8_plugins: 10,
                b8_rate: 300.0,
                b8_secs: 2,
            },
            Mode::Full => Plan {
                mode,
                rounds: 3,
                b1_pods: 20_000,
                b1_events: 20_000,
                b2_pods: 20_000,
                b2_events: 20_000,
                b2_plugins: vec![1, 4, 16],
                b3_rounds: 2,
                b3_pods: 1_000,
                b3_rate: 1_000.0,
                b3_secs: 10,
                b3_grace_secs: 5,
                b4_pods: 20_000,
                b5_pods: 50_000,
                b6_objects: 5_000,
                b7_pods: 10_000,
                b7_handlers: 50,
                b8_pods: 200_000,
                b8_plugins: 10,
                b8_rate: 5_000.0,
                b8_secs: 60,
            },
        }
    }
}
