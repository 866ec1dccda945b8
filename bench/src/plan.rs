//! Sizes and repetitions of every benchmark, for the quick (smoke) and the full
//! mode.
//!
//! Invariant: the full plan is the specification (20k pods for B1/B4, 50k for
//! B5, 5k replayed for B6, 50 handlers over 10k pods for B7, 200k pods with 10
//! plugins at 5k events/s for a minute for B8, 5k pods patched for B9, 20k
//! Deployments reconciled for B10, 50 idle instances for B11, a 20k-event burst
//! over 20k pods recorded for B12, 1M pods split over 4 sharded replicas
//! for B13) with at least
//! [`MIN_FULL_ROUNDS`] rounds per benchmark; the quick plan runs every row at
//! small sizes with two rounds, so both side orders of the ABBA alternation run.

/// The fewest rounds a full (publishable) run may have.
pub const MIN_FULL_ROUNDS: usize = 7;

/// Which plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Small sizes, two rounds: a few minutes on two busy cores.
    Quick,
    /// The real sizes, alternating rounds.
    Full,
}

/// All sizes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    /// Rounds per benchmark (arms alternate their order between rounds).
    pub rounds: usize,
    pub b1_pods: usize,
    pub b1_events: usize,
    pub b2_pods: usize,
    pub b2_events: usize,
    pub b2_plugins: Vec<usize>,
    pub b3_pods: usize,
    pub b3_rate: f64,
    pub b3_secs: u64,
    pub b3_grace_secs: u64,
    /// Milliseconds the slow neighbour takes per event.
    pub b3_slow_ms: u64,
    pub b4_pods: usize,
    pub b5_pods: usize,
    pub b6_objects: usize,
    pub b7_pods: usize,
    pub b7_handlers: usize,
    pub b8_pods: usize,
    pub b8_plugins: usize,
    pub b8_rate: f64,
    pub b8_secs: u64,
    /// Pods the writing plugin patches, and the burst of the isolation arms.
    pub b9_pods: usize,
    pub b9_events: usize,
    /// Deployments the controllers reconcile.
    pub b10_deployments: usize,
    /// Idle instances started after the first.
    pub b11_instances: usize,
    /// Pods synced before the recorded burst, and the burst.
    pub b12_pods: usize,
    pub b12_events: usize,
    /// Pods of the sharded replicas, their churn rate and length.
    pub b13_pods: usize,
    pub b13_rate: f64,
    pub b13_secs: u64,
}

impl Plan {
    /// The plan for `mode`.
    pub fn new(mode: Mode) -> Plan {
        match mode {
            Mode::Quick => Plan {
                mode,
                rounds: 2,
                b1_pods: 500,
                b1_events: 500,
                b2_pods: 300,
                b2_events: 300,
                b2_plugins: vec![1, 4, 16],
                b3_pods: 100,
                b3_rate: 200.0,
                b3_secs: 2,
                b3_grace_secs: 1,
                b3_slow_ms: 10,
                b4_pods: 500,
                b5_pods: 1000,
                b6_objects: 200,
                b7_pods: 300,
                b7_handlers: 10,
                b8_pods: 1000,
                b8_plugins: 10,
                b8_rate: 300.0,
                b8_secs: 2,
                b9_pods: 200,
                b9_events: 500,
                b10_deployments: 500,
                // Seconds either way; fewer would leave the per-instance
                // figure to page and allocator-segment rounding.
                b11_instances: 50,
                b12_pods: 500,
                b12_events: 500,
                b13_pods: 2_000,
                b13_rate: 200.0,
                b13_secs: 2,
            },
            Mode::Full => Plan {
                mode,
                rounds: MIN_FULL_ROUNDS,
                b1_pods: 20_000,
                b1_events: 20_000,
                b2_pods: 20_000,
                b2_events: 20_000,
                b2_plugins: vec![1, 4, 16],
                // 500 pods: each round first lets the 10 ms neighbours
                // handle the initial list (5 s), so the window starts with
                // every queue and buffer empty.
                b3_pods: 500,
                b3_rate: 1_000.0,
                b3_secs: 8,
                b3_grace_secs: 5,
                b3_slow_ms: 10,
                b4_pods: 20_000,
                b5_pods: 50_000,
                b6_objects: 5_000,
                b7_pods: 10_000,
                b7_handlers: 50,
                b8_pods: 200_000,
                b8_plugins: 10,
                b8_rate: 5_000.0,
                b8_secs: 60,
                b9_pods: 5_000,
                b9_events: 20_000,
                b10_deployments: 20_000,
                b11_instances: 50,
                b12_pods: 20_000,
                b12_events: 20_000,
                b13_pods: 1_000_000,
                b13_rate: 2_000.0,
                b13_secs: 20,
            },
        }
    }
}
