//! The host capabilities a plugin may be granted, one unit each, in the
//! manner of Spin's factors: each has its manifest configuration and its
//! validation, its linker bindings (for every WIT version that has it), and
//! its per-instance state.
//!
//! | capability | granted by | WIT |
//! |---|---|---|
//! | [`cache`] | `read = [...]` | `cache` (0.1, 0.2), read through `objects` (0.2) |
//! | [`log`] | always | `log` (0.1, 0.2), the guest's stdout and stderr |
//! | [`kube`] | `[[write]]` tables | `kube` (0.2) |
//! | [`events`] | `events` | `events` (0.2) |
//!
//! [`request`] is where every guest string of an API call becomes a typed
//! value, checked by the API server's rules, and where the request line is
//! rendered; [`api`] is the runtime's only view of the API server (a trait
//! the host implements); [`clock`] accounts for the time a call into the guest spends
//! blocked in the host, so that the wall deadline bounds the guest's own time.
//!
//! Invariant: a capability that is not granted is still linked (every world
//! links), and every call of it returns `forbidden`: never a trap, never a
//! request.

pub mod api;
pub mod cache;
pub mod clock;
pub mod events;
pub mod kube;
pub mod log;
pub mod request;

use std::sync::Arc;

use kube_informer::cache_view::CacheView;

use self::api::ClusterApi;
use self::kube::{Grants, ProtectedLeases, Quota, DEFAULT_WRITE_BURST, DEFAULT_WRITE_QPS};

/// Links every capability of every world into `linker`.
pub fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::host_state::HostState>,
) -> wasmtime::Result<()> {
    crate::world::v0_2::add_to_linker(linker)?;
    cache::add_to_linker(linker)?;
    log::add_to_linker(linker)?;
    kube::add_to_linker(linker)?;
    events::add_to_linker(linker)
}

/// What the host gives the capabilities of one plugin to work with: its cache,
/// and, when plugins may reach the cluster, the API and the plugin's grants.
#[derive(Clone)]
pub struct HostServices {
    /// The shared cache, as plugins query it.
    pub cache: Arc<dyn CacheView>,
    /// The API server, or `None` where there is none (checks, tests): every
    /// `kube` and `events` call then fails with `unavailable`.
    pub api: Option<Arc<dyn ClusterApi>>,
    /// The plugin's API grants, shared with the host so a reload can replace
    /// them for every running instance at once.
    pub grants: Grants,
    /// The host's `--dry-run`: every write of every plugin is a dry run.
    pub dry_run: bool,
    /// The host's identity (`reportingInstance` of Events).
    pub identity: String,
    /// The plugin's API quota, shared by every runner, worker and version of
    /// the plugin's name (the host keeps one per name).
    pub quota: Arc<Quota>,
    /// The user the plugin's requests act as (`Impersonate-User`), when the
    /// host gives each plugin its own identity.
    pub act_as: Option<String>,
    /// The host's own Leases, which no plugin may write.
    pub protected: Option<ProtectedLeases>,
    /// Whether the host checks the grants before sending. Always true, but
    /// for tests that show what the API server's own authorization stops
    /// with the host's check out of the way.
    #[doc(hidden)]
    pub enforce_grants: bool,
    /// The stop signal of this plugin version: raised by the host when the
    /// version stops, it ends the version's waits on the server, on write
    /// tokens and in quarantine at once ([`crate::stop`]).
    pub stop: Arc<crate::stop::Stop>,
    /// Sees every write the plugin is about to send (a shadow version's
    /// comparison); `None`: nobody looks.
    pub intents: Option<Arc<dyn kube::WriteIntents>>,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostServices")
            .field("api", &self.api.is_some())
            .field("dry_run", &self.dry_run)
            .field("identity", &self.identity)
            .field("act_as", &self.act_as)
            .finish()
    }
}

impl<C: CacheView> From<Arc<C>> for HostServices {
    fn from(cache: Arc<C>) -> Self {
        Self::cache_only(cache)
    }
}

impl From<Arc<dyn CacheView>> for HostServices {
    fn from(cache: Arc<dyn CacheView>) -> Self {
        Self::cache_only(cache)
    }
}

impl HostServices {
    /// Services with only a cache: no API server, no grants.
    pub fn cache_only(cache: Arc<dyn CacheView>) -> Self {
        Self {
            cache,
            api: None,
            grants: Grants::default(),
            dry_run: false,
            identity: "wasm-informer".into(),
            quota: Quota::new(DEFAULT_WRITE_QPS, DEFAULT_WRITE_BURST),
            act_as: None,
            protected: None,
            enforce_grants: true,
            stop: crate::stop::Stop::new(),
            intents: None,
        }
    }

    /// Services with a cache and the API server, under `grants`, with a
    /// quota of the grants' own rate: what a test of one plugin needs.
    pub fn with_api(cache: Arc<dyn CacheView>, api: Arc<dyn ClusterApi>, grants: Grants) -> Self {
        let s = grants.current();
        Self {
            api: Some(api),
            quota: Quota::new(s.write_qps, s.write_burst),
            grants,
            ..Self::cache_only(cache)
        }
    }
}
