//! Who may open an xDS or MCP stream, and which secrets it gets: takes a listener's [`CallPolicy`], a call's
//! `authorization` metadata and its first request (node and type URL), and yields the stream's [`Admitted`]
//! (verified identity, [`SecretAccess`], deadline) or the gRPC status that ends the call.
//!
//! The rules, after istiod (`pilot/pkg/xds/auth.go` `checkConnectionIdentity`, `pilot/pkg/xds/sds.go`
//! `filterAuthorizedResources`):
//! - On an authenticated listener ([`CallPolicy::Token`]) every call carries a service-account token for our
//!   audience, verified with TokenReview ([`token`]); without one the call ends `UNAUTHENTICATED`.
//! - A gateway's node namespace (and `SERVICE_ACCOUNT` metadata, when sent) must be the token's: otherwise the
//!   call ends `PERMISSION_DENIED`, so a pod cannot claim another namespace's gateway labels.
//! - A gateway gets the certificates (with private keys) of its namespace only when its service account may `get`
//!   Secrets there (SubjectAccessReview, [`access`]); when it may not get every Secret there, each Secret of its
//!   namespace its config names is asked about by name (a Role with `resourceNames`), and it gets those allowed
//!   ([`SecretAccess::Named`]). CA bundles (`-cacert`) are public and go to any verified proxy of the namespace. Anything withheld is logged once per stream and counted
//!   (`admitpilot_xds_secret_denied_total{reason}`). An API error denies.
//! - An MCP subscriber gets each collection only if its service account may `list` that kind cluster-wide (one
//!   SubjectAccessReview per kind, cached); the others are answered empty, and logged. One allowed nothing is
//!   refused (`PERMISSION_DENIED`).
//! - A stream ends when its token expires (`UNAUTHENTICATED`): the client reconnects with its rotated token, and
//!   is checked again.
//! - An open stream is checked again every [`RECHECK_INTERVAL`] (token and access, through caches that keep an
//!   answer no longer than that): a deleted ServiceAccount or RoleBinding ends it within twice that, before a
//!   Secret created afterwards can reach it; the client reconnects and gets what it may have now.
//! - On an open listener ([`CallPolicy::Open`]: `--xds-plaintext-addr`, folder mode) nobody is verified and no
//!   `kubernetes://` secret is sent, unless folder mode was told to (`--xds-unauthenticated-secrets`).

pub mod access;
mod gate;
pub mod token;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use envoy_types::pb::envoy::config::core::v3::Node;
use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use tonic::Status;

use super::metrics::XdsMetrics;
use super::node::NodeIdentity;
use super::resources::Family;
use access::{AccessReviewer, Decision, Question};
use admitpilot_model::Kind;
pub(crate) use gate::{certificate_secrets, SecretGate};
use token::{TokenError, TokenReviewer, VerifiedIdentity};

/// How the calls of one listener are admitted.
#[derive(Debug, Clone)]
pub enum CallPolicy {
    /// Nobody is verified. `serve_secrets`: send `kubernetes://` secrets anyway (folder mode on a trusted
    /// machine, `--xds-unauthenticated-secrets`); otherwise none is sent.
    Open {
        /// Whether unverified clients get secrets.
        serve_secrets: bool,
    },
    /// Service-account tokens checked with TokenReview, secrets and the MCP feed with SubjectAccessReview.
    Token(Arc<KubeAuth>),
}

/// The Secrets of a gateway's namespace its config names, worked out only when asked: only a gateway that may not
/// get every Secret of its namespace needs them (asked about one by one).
pub(crate) type SecretNames = Box<dyn FnOnce() -> BTreeSet<String> + Send>;

/// How often an open stream's token and access are checked again, by default.
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(30);

/// The API-server checks of [`CallPolicy::Token`].
#[derive(Debug)]
pub struct KubeAuth {
    tokens: TokenReviewer,
    access: AccessReviewer,
    recheck: Duration,
}

impl KubeAuth {
    /// Checks with `client`'s API server; tokens must be for `audience`; open streams are checked again every
    /// [`RECHECK_INTERVAL`].
    pub fn new(client: kube::Client, audience: String) -> Arc<Self> {
        Self::with_recheck(client, audience, RECHECK_INTERVAL)
    }

    /// Like [`KubeAuth::new`], checking open streams again every `recheck` (answers are cached no longer).
    pub fn with_recheck(client: kube::Client, audience: String, recheck: Duration) -> Arc<Self> {
        Arc::new(KubeAuth {
            tokens: TokenReviewer::new(client.clone(), audience, recheck),
            access: AccessReviewer::new(client, recheck),
            recheck,
        })
    }
}

/// Which `kubernetes://` secrets a stream gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretAccess {
    /// Every secret of its group.
    All,
    /// Every secret of its group except Ingress TLS Secrets (`kubernetes-ingress://<ns>/…`) of namespaces other
    /// than `namespace`: its identity may read Secrets in its own namespace only.
    OwnNamespace {
        /// The identity's namespace.
        namespace: String,
    },
    /// As [`SecretAccess::OwnNamespace`], but of the Secrets of its own namespace only those `allowed` (by name):
    /// its identity may `get` those Secrets, not every Secret there.
    Named {
        /// The identity's namespace.
        namespace: String,
        /// The Secrets of `namespace` it may get.
        allowed: Arc<BTreeSet<String>>,
    },
    /// No certificate; CA bundles only when `ca_bundles`.
    Withheld {
        /// Label of `admitpilot_xds_secret_denied_total`: `unauthenticated`, `rbac` or `api_error`.
        reason: &'static str,
        /// Why, for the log line.
        detail: String,
        /// CA bundles (public) are still sent.
        ca_bundles: bool,
    },
}

impl SecretAccess {
    /// Whether two decisions grant the same (the reasons' wording aside).
    fn grants_same(&self, other: &SecretAccess) -> bool {
        match (self, other) {
            (
                SecretAccess::Withheld { ca_bundles: a, .. },
                SecretAccess::Withheld { ca_bundles: b, .. },
            ) => a == b,
            _ => self == other,
        }
    }
}

/// Which MCP collections a stream gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectionAccess {
    /// Every collection.
    All,
    /// The collections of these kinds; the others are answered empty.
    Only(Arc<BTreeSet<Kind>>),
}

/// What a stream may do, decided before it is served.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    /// The verified identity (none on an open listener).
    pub identity: Option<VerifiedIdentity>,
    /// The secrets it gets.
    pub secrets: SecretAccess,
    /// The MCP collections it gets.
    pub collections: CollectionAccess,
    /// When the stream must end (its token expires).
    pub deadline: Option<Instant>,
}

impl Admitted {
    /// Whether `now` grants what this decision granted.
    pub(crate) fn grants_same(&self, now: &Admitted) -> bool {
        self.secrets.grants_same(&now.secrets) && self.collections == now.collections
    }
}

impl KubeAuth {
    /// The audience tokens must carry.
    pub fn audience(&self) -> &str {
        self.tokens.audience()
    }

    /// Verifies a bearer token with TokenReview (cached, as for xDS calls).
    pub async fn verify_token(&self, token: &str) -> Result<VerifiedIdentity, TokenError> {
        self.tokens.verify(token).await
    }
}

/// The bearer token of a request's `authorization: Bearer <token>` header or metadata, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl CallPolicy {
    /// How often an open stream is checked again (`None` on an open listener: there is nothing to check).
    pub(crate) fn recheck_interval(&self) -> Option<Duration> {
        match self {
            CallPolicy::Token(auth) => Some(auth.recheck),
            CallPolicy::Open { .. } => None,
        }
    }

    /// Checks an open stream again: its `token` is verified and its access decided as for a new stream.
    pub(crate) async fn recheck(
        &self,
        token: Option<&str>,
        (node, family): (Option<&Node>, Family),
        secret_names: SecretNames,
        metrics: &XdsMetrics,
    ) -> Result<Admitted, Status> {
        let mut headers = HeaderMap::new();
        if let Some(value) = token.and_then(|t| format!("Bearer {t}").parse().ok()) {
            headers.insert(AUTHORIZATION, value);
        }
        let identity = self.authenticate(&headers, metrics).await?;
        self.admit(identity, (node, family), secret_names, metrics)
            .await
    }

    /// Verifies the caller before anything is read from it (`Ok(None)` on an open listener).
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
        metrics: &XdsMetrics,
    ) -> Result<Option<VerifiedIdentity>, Status> {
        let CallPolicy::Token(auth) = self else {
            return Ok(None);
        };
        let verified = match bearer(headers) {
            Some(token) => auth.tokens.verify(token).await,
            None if headers.contains_key(AUTHORIZATION) => Err(TokenError::Malformed),
            None => Err(auth.tokens.missing()),
        };
        verified.map(Some).map_err(|error| {
            metrics.auth_failed(error.reason());
            tracing::warn!(%error, "xDS call refused: no verified identity");
            match error {
                TokenError::Unavailable(_) => Status::unavailable(error.to_string()),
                _ => Status::unauthenticated(error.to_string()),
            }
        })
    }

    /// Decides what the stream of a verified (or, on an open listener, unverified) caller may do, from its first
    /// request's node and family; `secret_names` gives the Secrets of the caller's namespace its config names
    /// (asked about one by one when it may not get every Secret there; not worked out otherwise).
    pub(crate) async fn admit(
        &self,
        identity: Option<VerifiedIdentity>,
        (node, family): (Option<&Node>, Family),
        secret_names: SecretNames,
        metrics: &XdsMetrics,
    ) -> Result<Admitted, Status> {
        let (auth, identity) = match (self, identity) {
            (CallPolicy::Token(auth), Some(identity)) => (auth, identity),
            (CallPolicy::Open { serve_secrets }, _) => {
                let secrets = if *serve_secrets {
                    SecretAccess::All
                } else {
                    SecretAccess::Withheld {
                        reason: "unauthenticated",
                        detail: "this xDS port verifies no identity (plaintext or open port)"
                            .into(),
                        ca_bundles: false,
                    }
                };
                return Ok(Admitted {
                    identity: None,
                    secrets,
                    collections: CollectionAccess::All,
                    deadline: None,
                });
            }
            (CallPolicy::Token(_), None) => {
                return Err(Status::unauthenticated("no verified identity"))
            }
        };
        let refuse = |reason: &'static str, status: Status| {
            metrics.auth_failed(reason);
            tracing::warn!(identity = %identity, error = %status.message(), "xDS stream refused");
            Err(status)
        };
        if identity.expires.is_some_and(|at| at <= SystemTime::now()) {
            return refuse(
                "invalid",
                Status::unauthenticated("the service-account token has expired"),
            );
        }
        let secrets = match family {
            Family::Envoy => {
                if let Err((reason, message)) = check_node(node, &identity) {
                    return refuse(
                        reason,
                        Status::permission_denied(format!("authorization failed: {message}")),
                    );
                }
                let question = Question::read_secrets(&identity.namespace);
                match auth.access.check(&identity, &question).await {
                    // Ingress TLS Secrets live in the Ingresses' namespaces: they need read access to every
                    // namespace's Secrets (as Higress's gateway has), else only the own namespace's go out.
                    Decision::Allowed => match auth
                        .access
                        .check(&identity, &Question::read_secrets(""))
                        .await
                    {
                        Decision::Allowed => SecretAccess::All,
                        _ => SecretAccess::OwnNamespace {
                            namespace: identity.namespace.clone(),
                        },
                    },
                    Decision::Denied(why) => {
                        let secret_names = secret_names();
                        let allowed = auth.allowed_secrets(&identity, &secret_names).await;
                        if allowed.is_empty() {
                            SecretAccess::Withheld {
                                reason: "rbac",
                                detail: format!(
                                    "{identity} may not {question} ({why}), nor get one of the {} Secrets of \
                                     its namespace its config names",
                                    secret_names.len()
                                ),
                                ca_bundles: true,
                            }
                        } else {
                            SecretAccess::Named {
                                namespace: identity.namespace.clone(),
                                allowed: Arc::new(allowed),
                            }
                        }
                    }
                    Decision::Unavailable(error) => SecretAccess::Withheld {
                        reason: "api_error",
                        detail: format!("cannot check whether {identity} may {question}: {error}"),
                        ca_bundles: true,
                    },
                }
            }
            Family::Mcp => SecretAccess::All,
        };
        let collections = match family {
            Family::Envoy => CollectionAccess::All,
            Family::Mcp => match auth.collections(&identity).await {
                Ok(collections) => collections,
                Err((reason, status)) => return refuse(reason, status),
            },
        };
        let left = token::remaining(identity.expires);
        let deadline = (left != std::time::Duration::MAX).then(|| Instant::now() + left);
        Ok(Admitted {
            identity: Some(identity),
            secrets,
            collections,
            deadline,
        })
    }
}

impl KubeAuth {
    /// Which of `names` (Secrets of `identity`'s namespace) it may `get`, one SubjectAccessReview each (cached);
    /// an API error counts as denied.
    async fn allowed_secrets(
        &self,
        identity: &VerifiedIdentity,
        names: &BTreeSet<String>,
    ) -> BTreeSet<String> {
        let decisions = futures::future::join_all(names.iter().map(|name| async move {
            let question = Question::read_secret(&identity.namespace, name);
            (name, self.access.check(identity, &question).await)
        }))
        .await;
        decisions
            .into_iter()
            .filter(|(_, decision)| decision.allowed())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The MCP collections `identity` may receive: the kinds it may `list` cluster-wide, as the API server's RBAC
    /// would let it read them. An API error counts as denied; an identity allowed none is refused.
    async fn collections(
        &self,
        identity: &VerifiedIdentity,
    ) -> Result<CollectionAccess, (&'static str, Status)> {
        let served = &*admitpilot_mcp::collection::SERVED;
        let decisions = futures::future::join_all(served.iter().map(|kind| async {
            (
                *kind,
                self.access
                    .check(identity, &Question::list_all(*kind))
                    .await,
            )
        }))
        .await;
        let allowed: BTreeSet<Kind> = decisions
            .iter()
            .filter(|(_, decision)| decision.allowed())
            .map(|(kind, _)| *kind)
            .collect();
        if allowed.len() == served.len() {
            return Ok(CollectionAccess::All);
        }
        let unavailable = decisions.iter().find_map(|(_, decision)| match decision {
            Decision::Unavailable(error) => Some(error.clone()),
            _ => None,
        });
        if allowed.is_empty() {
            return Err(match unavailable {
                Some(error) => (
                    "unavailable",
                    Status::unavailable(format!(
                        "cannot check which config {identity} may list: {error}"
                    )),
                ),
                None => (
                    "forbidden",
                    Status::permission_denied(format!(
                        "authorization failed: {identity} may not list any kind the MCP feed carries (e.g. {})",
                        Question::list_all(Kind::VirtualService)
                    )),
                ),
            });
        }
        let withheld: Vec<String> = served
            .iter()
            .filter(|kind| !allowed.contains(kind))
            .map(|kind| kind.info().resource_name())
            .collect();
        tracing::warn!(
            identity = %identity,
            withheld = ?withheld,
            api_error = unavailable.as_deref().unwrap_or("-"),
            "MCP collections answered empty: the subscriber's service account may not list them"
        );
        Ok(CollectionAccess::Only(Arc::new(allowed)))
    }
}

/// The node must be the identity's: same namespace, and same service account when the node names one.
fn check_node(
    node: Option<&Node>,
    identity: &VerifiedIdentity,
) -> Result<(), (&'static str, String)> {
    let Some(node) = node else {
        return Err(("namespace_mismatch", "the request carries no node".into()));
    };
    let claimed = NodeIdentity::from_node(node);
    if claimed.proxy.namespace != identity.namespace {
        return Err((
            "namespace_mismatch",
            format!(
                "the node's namespace {} is not the namespace of service account {identity}",
                claimed.proxy.namespace
            ),
        ));
    }
    match super::node::service_account(node) {
        Some(claimed) if claimed != identity.service_account => Err((
            "service_account_mismatch",
            format!("the node's SERVICE_ACCOUNT {claimed} is not the token's service account {identity}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn the_bearer_token_is_read_from_the_authorization_metadata() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer abc.def "));
        assert_eq!(bearer(&headers), Some("abc.def"));
        headers.insert(AUTHORIZATION, HeaderValue::from_static("bearer x"));
        assert_eq!(bearer(&headers), Some("x"));
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Basic x"));
        assert_eq!(bearer(&headers), None);
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&headers), None);
    }
}
