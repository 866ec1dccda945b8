//! The write-intent hook: where a plugin's writes are seen, as the typed
//! requests the host is about to send, by whoever compares them (shadow
//! versions, recordings).
//!
//! Job: [`WriteIntents::intended`] is called once for every write request
//! that passed the plugin's grants and limits, just before it is sent (or
//! refused by the fence or the quota), with the request as parsed from the
//! guest's arguments: typed, never the guest's raw strings.
//!
//! Invariant: the hook never changes or delays the request; an observer that
//! is slow slows only the plugin whose write it observes.

use super::super::request::ApiRequest;

/// Receives the writes a plugin intends.
pub trait WriteIntents: Send + Sync + 'static {
    /// `request` is about to be sent on behalf of the plugin.
    fn intended(&self, request: &ApiRequest);
}
