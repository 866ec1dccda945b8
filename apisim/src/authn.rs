//! Authentication: static bearer tokens (`Authorization: Bearer T`) mapped to users, as the
//! apiserver's token file authenticator with `bearertoken.Authenticator`, the
//! `AuthenticatedGroupAdder` and the anonymous authenticator behind `FailOnError`
//! (k8s.io/apiserver/pkg/authentication/...).
//!
//! Invariant: with authentication on, every request has exactly one user: the token's (with
//! `system:authenticated` added), `system:anonymous` (group `system:unauthenticated`) when no
//! bearer token was sent, and none at all (401) for a bearer token nobody registered.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

/// `system:masters`: members bypass authorization.
pub const MASTERS: &str = "system:masters";
/// Added to every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of the anonymous user.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of a request without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The user name of the admin token.
pub const ADMIN_USER: &str = "apisim-admin";

/// Who a request acts as.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name, e.g. `system:serviceaccount:ns:name`.
    pub name: String,
    /// User uid (may be empty).
    pub uid: String,
    /// Groups, in order.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The anonymous user.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.into(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.into()],
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// `serviceaccount.SplitUsername`: the namespace and name of a `system:serviceaccount:NS:NAME`
/// user, when NS is a DNS label and NAME a DNS subdomain; None for any other user name.
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let mut parts = rest.split(':');
    let (ns, name) = (parts.next()?, parts.next()?);
    if parts.next().is_some() || !is_dns_label(ns) || !is_dns_subdomain(name) {
        return None;
    }
    Some((ns, name))
}

/// The groups of a service account (`serviceaccount.MakeGroupNames`).
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// The registered bearer tokens. Cloning shares the same table; tokens may be added while the
/// simulator serves.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    inner: Arc<RwLock<HashMap<String, UserInfo>>>,
}

/// What a request's credentials say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// No bearer token (no `Authorization` header, another scheme, or an empty token).
    None,
    /// A registered token's user (groups as registered, without `system:authenticated`).
    User(UserInfo),
    /// A bearer token nobody registered (`invalid bearer token`).
    Invalid,
}

impl Tokens {
    /// Registers `token` for user `name` with `groups`. A service-account user
    /// (`system:serviceaccount:NS:NAME`) also gets `system:serviceaccounts` and
    /// `system:serviceaccounts:NS`, as the service-account token authenticator gives them.
    pub fn add(&self, token: &str, name: &str, groups: &[&str]) -> UserInfo {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if let Some((ns, _)) = split_service_account(name) {
            for g in service_account_groups(ns) {
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
        }
        let u = UserInfo {
            name: name.to_string(),
            uid: String::new(),
            groups,
        };
        self.inner.write().insert(token.to_string(), u.clone());
        u
    }

    /// Forgets `token`.
    pub fn remove(&self, token: &str) {
        self.inner.write().remove(token);
    }

    /// Reads an `Authorization` header as `bearertoken.Authenticator` does: `Bearer` (any case),
    /// one space, a non-empty token.
    pub fn credentials(&self, authorization: Option<&str>) -> Credentials {
        let auth = authorization.unwrap_or("").trim();
        let mut parts = auth.splitn(3, ' ');
        let scheme = parts.next().unwrap_or("");
        let token = parts.next().unwrap_or("");
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Credentials::None;
        }
        match self.inner.read().get(token) {
            Some(u) => Credentials::User(u.clone()),
            None => Credentials::Invalid,
        }
    }
}

/// The authenticated user of `creds` with authentication on: the token's user with
/// `system:authenticated` added (unless it already has it or `system:unauthenticated`), or the
/// anonymous user; None for an invalid token (401).
pub fn authenticated(creds: &Credentials) -> Option<UserInfo> {
    match creds {
        Credentials::Invalid => None,
        Credentials::None => Some(UserInfo::anonymous()),
        Credentials::User(u) => {
            let mut u = u.clone();
            if u.name != ANONYMOUS && !u.in_group(AUTHENTICATED) && !u.in_group(UNAUTHENTICATED) {
                u.groups.push(AUTHENTICATED.into());
            }
            Some(u)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_authenticate_as_the_apiserver_reads_them() {
        let t = Tokens::default();
        t.add("s3cret", "alice", &["dev"]);
        let sa = t.add("sa", "system:serviceaccount:team-a:bot", &[]);
        assert_eq!(
            sa.groups,
            vec!["system:serviceaccounts", "system:serviceaccounts:team-a"]
        );
        let alice = match t.credentials(Some("bearer s3cret")) {
            Credentials::User(u) => u,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            authenticated(&Credentials::User(alice)).unwrap().groups,
            vec!["dev", AUTHENTICATED]
        );
        assert_eq!(t.credentials(Some("Bearer nope")), Credentials::Invalid);
        assert_eq!(t.credentials(Some("Basic abc")), Credentials::None);
        assert_eq!(t.credentials(Some("Bearer ")), Credentials::None);
        assert_eq!(t.credentials(None), Credentials::None);
        assert_eq!(
            authenticated(&Credentials::None).unwrap(),
            UserInfo::anonymous()
        );
        assert_eq!(authenticated(&Credentials::Invalid), None);
    }

    #[test]
    fn service_account_names_split_as_split_username() {
        assert_eq!(
            split_service_account("system:serviceaccount:ns:a.b"),
            Some(("ns", "a.b"))
        );
        for bad in [
            "system:serviceaccount:ns",
            "system:serviceaccount:ns:a:b",
            "system:serviceaccount:Ns:a",
            "system:serviceaccount::a",
            "alice",
        ] {
            assert_eq!(split_service_account(bad), None, "{bad}");
        }
    }
}
