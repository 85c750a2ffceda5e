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
//!   Secrets there (SubjectAccessReview, [`access`]); CA bundles (`-cacert`) are public and go to any verified
//!   proxy of the namespace. Anything withheld is logged once per stream and counted
//!   (`admitpilot_xds_secret_denied_total{reason}`). An API error denies.
//! - An MCP subscriber (the whole validated config) must be allowed to `list` VirtualServices cluster-wide.
//! - A stream ends when its token expires (`UNAUTHENTICATED`): the client reconnects with its rotated token, and
//!   is checked again.
//! - On an open listener ([`CallPolicy::Open`]: `--xds-plaintext-addr`, folder mode) nobody is verified and no
//!   `kubernetes://` secret is sent, unless folder mode was told to (`--xds-unauthenticated-secrets`).

pub mod access;
mod gate;
pub mod token;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use envoy_types::pb::envoy::config::core::v3::Node;
use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use tonic::Status;

use super::metrics::XdsMetrics;
use super::node::NodeIdentity;
use super::resources::Family;
use access::{AccessReviewer, Decision, Question};
pub(crate) use gate::SecretGate;
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

/// The API-server checks of [`CallPolicy::Token`].
#[derive(Debug)]
pub struct KubeAuth {
    tokens: TokenReviewer,
    access: AccessReviewer,
}

impl KubeAuth {
    /// Checks with `client`'s API server; tokens must be for `audience`.
    pub fn new(client: kube::Client, audience: String) -> Arc<Self> {
        Arc::new(KubeAuth {
            tokens: TokenReviewer::new(client.clone(), audience),
            access: AccessReviewer::new(client),
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

/// What a stream may do, decided before it is served.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    /// The verified identity (none on an open listener).
    pub identity: Option<VerifiedIdentity>,
    /// The secrets it gets.
    pub secrets: SecretAccess,
    /// When the stream must end (its token expires).
    pub deadline: Option<Instant>,
}

/// The bearer token of a call's metadata (`authorization: Bearer <token>`), if any.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl CallPolicy {
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
    /// request's node and family.
    pub(crate) async fn admit(
        &self,
        identity: Option<VerifiedIdentity>,
        node: Option<&Node>,
        family: Family,
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
                    Decision::Denied(why) => SecretAccess::Withheld {
                        reason: "rbac",
                        detail: format!("{identity} may not {question} ({why})"),
                        ca_bundles: true,
                    },
                    Decision::Unavailable(error) => SecretAccess::Withheld {
                        reason: "api_error",
                        detail: format!("cannot check whether {identity} may {question}: {error}"),
                        ca_bundles: true,
                    },
                }
            }
            Family::Mcp => {
                let question = Question::list_config();
                match auth.access.check(&identity, &question).await {
                    Decision::Allowed => SecretAccess::All,
                    Decision::Denied(why) => {
                        return refuse(
                            "forbidden",
                            Status::permission_denied(format!(
                                "authorization failed: {identity} may not {question} ({why}), which the MCP feed \
                                 carries"
                            )),
                        )
                    }
                    Decision::Unavailable(error) => {
                        return refuse(
                            "unavailable",
                            Status::unavailable(format!(
                                "cannot check whether {identity} may {question}: {error}"
                            )),
                        )
                    }
                }
            }
        };
        let left = token::remaining(identity.expires);
        let deadline = (left != std::time::Duration::MAX).then(|| Instant::now() + left);
        Ok(Admitted {
            identity: Some(identity),
            secrets,
            deadline,
        })
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
