//! The fence: until when this replica may still act on the lease it holds.
//!
//! Job: one shared value that the write path consults before every request
//! to the API server. It is open until `renew sent + lease duration − clock
//! skew margin`, measured on this process's monotonic clock from the moment
//! the last successful acquisition or renewal was *sent*; each success pushes
//! that deadline on. It closes by itself when the deadline passes, and is
//! closed at once when the replica loses or gives up its lease, before its
//! plugins are stopped.
//!
//! Why that deadline is safe: another replica takes the lease over only after
//! it has seen the lease record unchanged for a whole lease duration, timed
//! on its own clock from the moment it *observed* the last renewal (client-go
//! semantics). It cannot observe a renewal before the renewal was sent, so its
//! takeover is at least a lease duration after the send, while the fence
//! closed a margin earlier. The margin absorbs the difference in clock *rates*
//! between the two processes (offsets do not matter: no replica compares its
//! clock with a timestamp another wrote) and the time between the check and the
//! request reaching the API server that the request's own timeout does not
//! cover (see [`Fence::check`]).
//!
//! The hook for the write path: before sending a request whose timeout is
//! `t`, call [`Fence::check`]`(t)` and send only on `Ok`; give the request that
//! same timeout. A request that passes can reach the server no later than the
//! fence's deadline.
//!
//! For tests only: with the environment variable [`TEST_DISABLE_ENV`] set to
//! `1`, [`Fence::admit`] lets every call through with its own deadline (and
//! logs a warning once). It is the seeded bug the cluster tests' history
//! checker must catch; it is read here and nowhere else, and no
//! configuration turns it on.
//!
//! Invariant: once [`Fence::shut`] has been called the fence never opens
//! again; [`Fence::close`] only until the next successful renewal.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasm_informer_runtime::capability::api::Tenure;

/// Why a write may not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    /// The replica does not hold its lease (standby, lost, or shutting down).
    #[error("this replica does not hold its lease")]
    NotHeld,
    /// The lease is held, but too little of it is left for a request to be
    /// answered before another replica could take it over.
    #[error("only {timeout_ms} ms of the lease are left, too little for a request")]
    TooLate {
        /// What was left of the fence.
        timeout_ms: u64,
    },
    /// The call began under an earlier tenure of the lease, which was lost
    /// since (the replica may hold the lease again, but another replica may
    /// have acted in between).
    #[error("the event began under an earlier tenure of the lease, which was lost since")]
    StaleTenure,
}

/// Test only: set to `1`, the write path's fence check admits everything.
pub const TEST_DISABLE_ENV: &str = "WASM_INFORMER_TEST_DISABLE_FENCE";

/// Whether [`TEST_DISABLE_ENV`] is `1` (read once).
fn disabled_for_tests() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| {
        let on = std::env::var(TEST_DISABLE_ENV).is_ok_and(|v| v == "1");
        if on {
            tracing::warn!(
                "{TEST_DISABLE_ENV}=1: the fence admits every write (a seeded bug for tests; never set it in a deployment)"
            );
        }
        on
    })
}

/// The shortest time a request is sent with: less than this left of the
/// fence, and the request is not sent.
pub const MIN_REQUEST_TIME: Duration = Duration::from_millis(20);

#[derive(Debug)]
struct State {
    /// Open strictly before this instant; `None`: closed.
    deadline: Option<Instant>,
    /// Never opens again.
    shut: bool,
    /// The current tenure: bumped each time the fence opens after it was
    /// closed or had lapsed, or is revoked, so nothing begun under an
    /// earlier tenure passes.
    tenure: u64,
    /// The latest deadline of a request admitted so far: no request sent
    /// before now can be applied after it.
    admitted_until: Option<Instant>,
}

/// The shared fence of one lease.
#[derive(Debug)]
pub struct Fence {
    state: Mutex<State>,
    /// `None` for a host without leases: always open.
    validity: Option<Duration>,
}

impl Fence {
    /// A closed fence for a lease of `lease_duration`, with `skew_margin`
    /// taken off every deadline. `skew_margin` must be below `lease_duration`.
    pub fn new(lease_duration: Duration, skew_margin: Duration) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                deadline: None,
                shut: false,
                tenure: 0,
                admitted_until: None,
            }),
            validity: Some(lease_duration.saturating_sub(skew_margin)),
        })
    }

    /// The fence of a host that runs alone (`[cluster] mode = "none"`):
    /// always open.
    pub fn unfenced() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                deadline: None,
                shut: false,
                tenure: 0,
                admitted_until: None,
            }),
            validity: None,
        })
    }

    /// The hook for the write path: may a request with timeout `timeout` be
    /// sent now? `Ok` means it can reach the API server before another replica
    /// can take the lease over; give the request that timeout.
    pub fn check(&self, timeout: Duration) -> Result<(), Fenced> {
        let now = Instant::now();
        if self.permits_until(now + timeout) {
            return Ok(());
        }
        if self.permits(now) {
            Err(Fenced::TooLate {
                timeout_ms: timeout.as_millis() as u64,
            })
        } else {
            Err(Fenced::NotHeld)
        }
    }

    /// The tenure that a call into a plugin starting now begins in: `None`
    /// when the fence is not open now (for a host without leases, tenure 0).
    pub fn tenure(&self) -> Option<Tenure> {
        let st = self.state.lock();
        if st.shut {
            return None;
        }
        match (self.validity, st.deadline) {
            (None, _) => Some(Tenure(st.tenure)),
            (Some(_), Some(d)) if Instant::now() < d => Some(Tenure(st.tenure)),
            _ => None,
        }
    }

    /// The hook for the write path of a call that began in `tenure`: `Ok`
    /// with the instant the request must be answered by (no later than
    /// `deadline`, and before the fence closes), or why nothing may be sent:
    /// the tenure is over (the lease was lost, even if it was won back
    /// since), or too little of it is left for a request.
    pub fn admit(&self, tenure: Option<Tenure>, deadline: Instant) -> Result<Instant, Fenced> {
        if disabled_for_tests() {
            return Ok(deadline);
        }
        let now = Instant::now();
        let mut st = self.state.lock();
        if st.shut {
            return Err(Fenced::NotHeld);
        }
        if self.validity.is_none() {
            return Ok(deadline);
        }
        let Some(closes) = st.deadline.filter(|d| now < *d) else {
            return Err(Fenced::NotHeld);
        };
        if tenure != Some(Tenure(st.tenure)) {
            return Err(Fenced::StaleTenure);
        }
        let until = deadline.min(closes);
        if until.saturating_duration_since(now) < MIN_REQUEST_TIME {
            return Err(Fenced::TooLate {
                timeout_ms: until.saturating_duration_since(now).as_millis() as u64,
            });
        }
        st.admitted_until = Some(st.admitted_until.map_or(until, |a| a.max(until)));
        Ok(until)
    }

    /// Ends the current tenure while the lease stays held: every call begun
    /// before may send nothing more (its writes get [`Fenced::StaleTenure`]),
    /// calls begun after are admitted as usual. Returns the instant after
    /// which no request admitted before can still be applied by the server
    /// (`None`: none is outstanding). This is how a hand-over that cannot wait
    /// any longer for a plugin still handling a key given up goes on safely.
    pub fn revoke(&self) -> Option<Instant> {
        let mut st = self.state.lock();
        st.tenure += 1;
        st.admitted_until.filter(|a| Instant::now() < *a)
    }

    /// Whether the fence is open at `now`.
    pub fn permits(&self, now: Instant) -> bool {
        self.permits_until(now)
    }

    /// Whether the fence stays open until `until` (inclusive).
    pub fn permits_until(&self, until: Instant) -> bool {
        let st = self.state.lock();
        if st.shut {
            return false;
        }
        match self.validity {
            None => true,
            Some(_) => st.deadline.is_some_and(|d| until < d),
        }
    }

    /// The instant the fence closes by itself, if open.
    pub fn deadline(&self) -> Option<Instant> {
        let st = self.state.lock();
        if st.shut {
            return None;
        }
        st.deadline
    }

    /// Records a successful acquisition or renewal that was sent at `sent`.
    pub fn renewed(&self, sent: Instant) {
        let Some(validity) = self.validity else {
            return;
        };
        let mut st = self.state.lock();
        if st.shut {
            return;
        }
        let d = sent + validity;
        match st.deadline {
            Some(old) if Instant::now() < old => st.deadline = Some(old.max(d)),
            // Closed or lapsed: whatever began before may not write now.
            _ => {
                st.tenure += 1;
                st.deadline = Some(d);
            }
        }
    }

    /// Closes the fence until the next successful renewal (the lease was lost).
    pub fn close(&self) {
        self.state.lock().deadline = None;
    }

    /// Closes the fence for good (shutdown): no renewal reopens it.
    pub fn shut(&self) {
        let mut st = self.state.lock();
        st.deadline = None;
        st.shut = true;
    }

    /// Whether [`Fence::shut`] was called.
    pub fn is_shut(&self) -> bool {
        self.state.lock().shut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_until_renew_plus_lease_minus_margin() {
        let f = Fence::new(Duration::from_secs(15), Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(!f.permits(t0), "closed until the first renewal");
        assert_eq!(f.check(Duration::ZERO), Err(Fenced::NotHeld));
        f.renewed(t0);
        assert!(f.permits(t0 + Duration::from_millis(13_999)));
        assert!(!f.permits(t0 + Duration::from_secs(14)));
        assert_eq!(f.deadline(), Some(t0 + Duration::from_secs(14)));
        // A request must complete before the deadline.
        assert!(f.permits_until(t0 + Duration::from_secs(10)));
        assert!(f.check(Duration::from_secs(20)).is_err());
        // A renewal sent earlier than the last one never shortens the fence.
        f.renewed(t0 - Duration::from_secs(5));
        assert_eq!(f.deadline(), Some(t0 + Duration::from_secs(14)));
        f.renewed(t0 + Duration::from_secs(2));
        assert_eq!(f.deadline(), Some(t0 + Duration::from_secs(16)));
    }

    #[test]
    fn close_lasts_until_the_next_renewal_and_shut_forever() {
        let f = Fence::new(Duration::from_secs(3), Duration::from_millis(500));
        let now = Instant::now();
        f.renewed(now);
        assert!(f.check(Duration::from_millis(100)).is_ok());
        f.close();
        assert_eq!(f.check(Duration::ZERO), Err(Fenced::NotHeld));
        f.renewed(Instant::now());
        assert!(f.check(Duration::ZERO).is_ok());
        f.shut();
        f.renewed(Instant::now());
        assert!(!f.permits(Instant::now()));
        assert!(f.is_shut());
    }

    #[test]
    fn a_host_without_leases_is_never_fenced() {
        let f = Fence::unfenced();
        assert!(f.check(Duration::from_secs(3600)).is_ok());
        f.shut();
        assert!(f.check(Duration::ZERO).is_err());
    }

    #[test]
    fn too_late_is_told_apart_from_not_held() {
        let f = Fence::new(Duration::from_secs(2), Duration::ZERO);
        f.renewed(Instant::now());
        assert_eq!(
            f.check(Duration::from_secs(5)),
            Err(Fenced::TooLate { timeout_ms: 5000 })
        );
    }

    #[test]
    fn a_call_longer_than_the_rest_of_the_lease_is_cut_to_the_fence_not_refused() {
        let f = Fence::new(Duration::from_secs(3), Duration::from_millis(500));
        let sent = Instant::now();
        f.renewed(sent);
        let tenure = f.tenure();
        assert!(tenure.is_some());
        // write_timeout_ms 10 s with 2.5 s of fence left: sent, cut to the
        // fence's deadline.
        let until = f
            .admit(tenure, Instant::now() + Duration::from_secs(10))
            .expect("admitted");
        assert_eq!(until, sent + Duration::from_millis(2500));
        // A shorter call keeps its own deadline.
        let short = Instant::now() + Duration::from_millis(100);
        assert_eq!(f.admit(tenure, short), Ok(short));
        // Less than the shortest request time left: refused, not sent.
        assert!(matches!(
            f.admit(tenure, Instant::now() + Duration::from_millis(5)),
            Err(Fenced::TooLate { .. })
        ));
    }

    #[test]
    fn a_revoked_tenure_writes_nothing_more_while_later_calls_do() {
        let f = Fence::new(Duration::from_secs(3), Duration::from_millis(500));
        f.renewed(Instant::now());
        let stuck = f.tenure();
        let until = f
            .admit(stuck, Instant::now() + Duration::from_millis(800))
            .expect("admitted");
        let drained = f.revoke().expect("a request is outstanding");
        assert_eq!(drained, until, "the last admitted request's deadline");
        assert_eq!(
            f.admit(stuck, Instant::now() + Duration::from_secs(1)),
            Err(Fenced::StaleTenure),
            "a call begun before the revocation"
        );
        let fresh = f.tenure();
        assert_ne!(fresh, stuck);
        assert!(f
            .admit(fresh, Instant::now() + Duration::from_secs(1))
            .is_ok());
        assert!(f.deadline().is_some(), "the lease is still held");
    }

    #[test]
    fn a_call_begun_under_a_lost_tenure_never_writes_under_the_next() {
        let f = Fence::new(Duration::from_secs(3), Duration::from_millis(500));
        f.renewed(Instant::now());
        let first = f.tenure();
        let later = || Instant::now() + Duration::from_secs(1);
        assert!(f.admit(first, later()).is_ok());
        // A renewal while open keeps the tenure.
        f.renewed(Instant::now());
        assert_eq!(f.tenure(), first);
        // Lost, then won back: the fence reopens under a new tenure, and
        // what began under the first may not write.
        f.close();
        assert_eq!(f.admit(first, later()), Err(Fenced::NotHeld));
        assert_eq!(f.tenure(), None, "nothing begins while closed");
        f.renewed(Instant::now());
        let second = f.tenure();
        assert_ne!(second, first);
        assert_eq!(f.admit(first, later()), Err(Fenced::StaleTenure));
        assert!(f.admit(second, later()).is_ok());
        // A lapse (no renewal in time) ends a tenure too.
        let g = Fence::new(Duration::from_millis(40), Duration::ZERO);
        g.renewed(Instant::now());
        let t = g.tenure();
        std::thread::sleep(Duration::from_millis(60));
        g.renewed(Instant::now());
        assert_eq!(g.admit(t, later()), Err(Fenced::StaleTenure));
        // Shut: nothing, whatever the tenure.
        f.shut();
        assert_eq!(f.admit(second, later()), Err(Fenced::NotHeld));
    }
}
