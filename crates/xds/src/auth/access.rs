//! Access checks: takes a verified identity and a question ("may it get Secrets in namespace N?", "may it get
//! the Secret N/S?", "may it list the Istio config?") and yields allowed or denied, asking the API server with a SubjectAccessReview as istiod's
//! `CredentialsController::Authorize` (pilot/pkg/credentials/kube/secrets.go) does before it sends a credential.
//! Answers are cached per user and question ([`ALLOWED_TTL`], [`DENIED_TTL`], bounded); an API error is not an
//! answer: it denies and is not cached.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::token::VerifiedIdentity;
use admitpilot_model::Kind;

/// How long an allowed answer is reused at most (a revoked RoleBinding takes effect after this, for new streams
/// and at an open stream's next re-check).
pub const ALLOWED_TTL: Duration = Duration::from_secs(30);
/// How long a denied answer is reused (a new RoleBinding takes effect for new streams after this).
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// Most cached answers; past it, expired ones are dropped, then all of them.
pub const MAX_CACHED: usize = 4096;

/// One question about a resource, as a SubjectAccessReview's `resourceAttributes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Question {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Resource plural.
    pub resource: &'static str,
    /// Verb.
    pub verb: &'static str,
    /// Namespace (`""`: cluster-wide).
    pub namespace: String,
    /// The one object asked about (`""`: any of them), as RBAC's `resourceNames` name it.
    pub name: String,
}

impl Question {
    /// May it `get` Secrets in `namespace`?
    pub fn read_secrets(namespace: &str) -> Self {
        Self::read_secret(namespace, "")
    }

    /// May it `get` the Secret `namespace/name` (`name` empty: any Secret there)? A Role with `resourceNames`
    /// answers this one, not [`Question::read_secrets`].
    pub fn read_secret(namespace: &str, name: &str) -> Self {
        Question {
            group: "",
            resource: "secrets",
            verb: "get",
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// May it `list` objects of `kind` in every namespace (what an MCP subscriber receives of that collection)?
    pub fn list_all(kind: Kind) -> Self {
        let info = kind.info();
        Question {
            group: info.group,
            resource: info.plural,
            verb: "list",
            namespace: String::new(),
            name: String::new(),
        }
    }
}

impl std::fmt::Display for Question {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        let name = if self.name.is_empty() {
            String::new()
        } else {
            format!("/{}", self.name)
        };
        match self.namespace.as_str() {
            "" => write!(
                f,
                "{} {}{}{name} (all namespaces)",
                self.verb, self.resource, group
            ),
            ns => write!(f, "{} {}{}{name} in {ns}", self.verb, self.resource, group),
        }
    }
}

/// The answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// RBAC allows it.
    Allowed,
    /// RBAC does not allow it (the API server's reason, possibly empty).
    Denied(String),
    /// The API server could not be asked; treated as denied.
    Unavailable(String),
}

impl Decision {
    /// Whether access is granted.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allowed)
    }
}

type Key = (String, Question);

/// Asks SubjectAccessReviews and remembers the answers.
pub struct AccessReviewer {
    client: kube::Client,
    allowed_ttl: Duration,
    cache: Mutex<HashMap<Key, (Decision, Instant)>>,
}

impl std::fmt::Debug for AccessReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessReviewer").finish_non_exhaustive()
    }
}

impl AccessReviewer {
    /// Asks `client`'s API server, reusing an allowed answer for at most `allowed_ttl` (and [`ALLOWED_TTL`]).
    pub fn new(client: kube::Client, allowed_ttl: Duration) -> Self {
        AccessReviewer {
            client,
            allowed_ttl: allowed_ttl.min(ALLOWED_TTL),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `identity` may do what `question` asks (cached).
    pub async fn check(&self, identity: &VerifiedIdentity, question: &Question) -> Decision {
        let key = (identity.user(), question.clone());
        let now = Instant::now();
        if let Some((decision, _)) = self.lock().get(&key).filter(|(_, until)| *until > now) {
            return decision.clone();
        }
        let decision = self.review(identity, question).await;
        let ttl = match decision {
            Decision::Allowed => self.allowed_ttl,
            Decision::Denied(_) => DENIED_TTL,
            Decision::Unavailable(_) => return decision,
        };
        let mut cache = self.lock();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (decision.clone(), now + ttl));
        decision
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (Decision, Instant)>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn review(&self, identity: &VerifiedIdentity, question: &Question) -> Decision {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(identity.user()),
                groups: Some(identity.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(question.group.to_string()),
                    resource: Some(question.resource.to_string()),
                    verb: Some(question.verb.to_string()),
                    namespace: Some(question.namespace.clone()),
                    name: (!question.name.is_empty()).then(|| question.name.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        match Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
        {
            Ok(answer) => match answer.status {
                Some(status) if status.allowed && status.denied != Some(true) => Decision::Allowed,
                Some(status) => Decision::Denied(status.reason.unwrap_or_default()),
                None => Decision::Unavailable("the SubjectAccessReview has no status".into()),
            },
            Err(error) => Decision::Unavailable(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_read_as_rbac_rules() {
        assert_eq!(
            Question::read_secrets("gw").to_string(),
            "get secrets in gw"
        );
        assert_eq!(
            Question::read_secret("gw", "gw-cert").to_string(),
            "get secrets/gw-cert in gw"
        );
        assert_eq!(
            Question::list_all(Kind::VirtualService).to_string(),
            "list virtualservices.networking.istio.io (all namespaces)"
        );
    }
}
