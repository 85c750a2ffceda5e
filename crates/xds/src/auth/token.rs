//! Service-account tokens: takes the bearer token an xDS client sent and yields its verified Kubernetes identity
//! (namespace, service account, expiry), asking the API server with a TokenReview for our audience, as istiod's
//! `ValidateK8sJwt` (security/pkg/k8s/tokenreview) does for its authenticated port 15012. Answers are cached by
//! the token's SHA-256 (the token itself is not kept), bounded in size, for at most [`VALID_TTL`] and never past
//! the token's own expiry; API errors are not cached and deny.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

/// Longest a verified token is trusted without asking again (by default: [`super::RECHECK_INTERVAL`]).
pub const VALID_TTL: Duration = Duration::from_secs(30);
/// How long a token the API server refused stays refused without asking again.
pub const INVALID_TTL: Duration = Duration::from_secs(5);
/// Most cached answers; past it, expired ones are dropped, then all of them.
pub const MAX_CACHED: usize = 4096;
/// Longest token accepted (Kubernetes tokens are about 1 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// A service account whose token the API server verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedIdentity {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account's name.
    pub service_account: String,
    /// The groups the API server reported (`system:serviceaccounts`, `system:serviceaccounts:<ns>`, …).
    pub groups: Vec<String>,
    /// The pod the token is bound to, when it is a bound token.
    pub pod: Option<String>,
    /// When the token expires (`exp` claim), when it does.
    pub expires: Option<SystemTime>,
}

impl VerifiedIdentity {
    /// `system:serviceaccount:<namespace>:<name>`, the user name RBAC knows it by.
    pub fn user(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }
}

impl std::fmt::Display for VerifiedIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.service_account)
    }
}

/// Why a token was not accepted (never contains the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No `authorization: Bearer` metadata.
    #[error("no service-account token: send `authorization: Bearer <token>` (a projected token with audience {audience})")]
    Missing {
        /// The audience expected.
        audience: String,
    },
    /// The token is too long or not text.
    #[error("the bearer token is malformed")]
    Malformed,
    /// The API server did not authenticate it (expired, revoked, wrong audience, unknown signer).
    #[error("the service-account token is not valid for audience {audience}: {reason}")]
    Invalid {
        /// The audience expected.
        audience: String,
        /// The API server's reason, or ours.
        reason: String,
    },
    /// The API server could not be asked; nothing is served without an answer.
    #[error("cannot verify the service-account token now (TokenReview failed): {0}")]
    Unavailable(String),
}

impl TokenError {
    /// Short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::Missing { .. } => "missing",
            TokenError::Malformed => "malformed",
            TokenError::Invalid { .. } => "invalid",
            TokenError::Unavailable(_) => "unavailable",
        }
    }
}

type Digest = [u8; 32];

/// Verifies tokens with TokenReview and remembers the answers.
pub struct TokenReviewer {
    client: kube::Client,
    audience: String,
    valid_ttl: Duration,
    cache: Mutex<HashMap<Digest, Cached>>,
}

#[derive(Clone)]
struct Cached {
    answer: Result<VerifiedIdentity, TokenError>,
    until: Instant,
}

impl std::fmt::Debug for TokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewer")
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl TokenReviewer {
    /// Verifies tokens with `client`'s API server, for `audience`, trusting an answer for at most `valid_ttl`
    /// (and [`VALID_TTL`]).
    pub fn new(client: kube::Client, audience: String, valid_ttl: Duration) -> Self {
        TokenReviewer {
            client,
            audience,
            valid_ttl: valid_ttl.min(VALID_TTL),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The audience tokens must carry.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The error for a call without a token.
    pub fn missing(&self) -> TokenError {
        TokenError::Missing {
            audience: self.audience.clone(),
        }
    }

    /// Verifies `token` (cached).
    pub async fn verify(&self, token: &str) -> Result<VerifiedIdentity, TokenError> {
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Malformed);
        }
        let digest = digest(token);
        let now = Instant::now();
        if let Some(cached) = self.lock().get(&digest).filter(|c| c.until > now) {
            return cached.answer.clone();
        }
        let answer = self.review(token).await;
        let until = match &answer {
            Ok(identity) => now + self.valid_ttl.min(remaining(identity.expires)),
            Err(TokenError::Invalid { .. }) => now + INVALID_TTL,
            // Not an answer about the token: ask again next time.
            Err(_) => return answer,
        };
        let mut cache = self.lock();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, c| c.until > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(
            digest,
            Cached {
                answer: answer.clone(),
                until,
            },
        );
        answer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Cached>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn review(&self, token: &str) -> Result<VerifiedIdentity, TokenError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| TokenError::Unavailable(error.to_string()))?;
        identity_of(&answer, &self.audience, token)
    }
}

/// Reads the identity out of a TokenReview answer: authenticated, for `audience`, a service account.
fn identity_of(
    answer: &TokenReview,
    audience: &str,
    token: &str,
) -> Result<VerifiedIdentity, TokenError> {
    let invalid = |reason: &str| TokenError::Invalid {
        audience: audience.to_string(),
        reason: reason.to_string(),
    };
    let status = answer
        .status
        .as_ref()
        .ok_or_else(|| invalid("the TokenReview has no status"))?;
    if let Some(error) = status.error.as_deref().filter(|e| !e.is_empty()) {
        return Err(invalid(error));
    }
    if status.authenticated != Some(true) {
        return Err(invalid("not authenticated"));
    }
    // An authenticator that ignores audiences reports none: the token may have been made for someone else.
    if !status
        .audiences
        .as_ref()
        .is_some_and(|audiences| audiences.iter().any(|a| a == audience))
    {
        return Err(invalid("the token is not for this audience"));
    }
    let user = status
        .user
        .as_ref()
        .ok_or_else(|| invalid("no user in the TokenReview"))?;
    let groups = user.groups.clone().unwrap_or_default();
    if !groups.iter().any(|g| g == "system:serviceaccounts") {
        return Err(invalid("the token is not a service account's"));
    }
    let name = user.username.as_deref().unwrap_or_default();
    let Some(("system", "serviceaccount", namespace, service_account)) = split_user(name) else {
        return Err(invalid(
            "the user name is not system:serviceaccount:<ns>:<name>",
        ));
    };
    let pod = user
        .extra
        .as_ref()
        .and_then(|extra| extra.get("authentication.kubernetes.io/pod-name"))
        .and_then(|values| values.first().cloned());
    Ok(VerifiedIdentity {
        namespace: namespace.to_string(),
        service_account: service_account.to_string(),
        groups,
        pod,
        expires: expiry(token),
    })
}

fn split_user(name: &str) -> Option<(&str, &str, &str, &str)> {
    let mut parts = name.split(':');
    let parsed = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !parsed.2.is_empty() && !parsed.3.is_empty()).then_some(parsed)
}

/// The `exp` claim of a JWT, read after the API server verified the token (its signature covers the claim).
fn expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    Some(UNIX_EPOCH + Duration::from_secs(exp))
}

/// Time left until `expires` (zero when past; unbounded when the token does not expire).
pub fn remaining(expires: Option<SystemTime>) -> Duration {
    match expires {
        Some(at) => at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
        None => Duration::MAX,
    }
}

fn digest(token: &str) -> Digest {
    let hash = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0; 32];
    out.copy_from_slice(hash.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};

    fn jwt(claims: serde_json::Value) -> String {
        let part = |v: &serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        format!(
            "{}.{}.sig",
            part(&serde_json::json!({"alg": "RS256"})),
            part(&claims)
        )
    }

    fn answer(authenticated: bool, user: &str, groups: &[&str], audiences: &[&str]) -> TokenReview {
        TokenReview {
            status: Some(TokenReviewStatus {
                authenticated: Some(authenticated),
                audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
                user: Some(UserInfo {
                    username: Some(user.into()),
                    groups: Some(groups.iter().map(|g| g.to_string()).collect()),
                    ..Default::default()
                }),
                error: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_service_account_for_our_audience_is_accepted() {
        let token = jwt(serde_json::json!({"exp": 4_000_000_000u64}));
        let identity = identity_of(
            &answer(
                true,
                "system:serviceaccount:gw:gateway",
                &["system:serviceaccounts", "system:serviceaccounts:gw"],
                &["admitpilot"],
            ),
            "admitpilot",
            &token,
        )
        .unwrap();
        assert_eq!(identity.namespace, "gw");
        assert_eq!(identity.service_account, "gateway");
        assert_eq!(identity.user(), "system:serviceaccount:gw:gateway");
        assert_eq!(
            identity.expires,
            Some(UNIX_EPOCH + Duration::from_secs(4_000_000_000))
        );
    }

    #[test]
    fn other_audiences_users_and_failures_are_refused() {
        let sa = ["system:serviceaccounts"];
        let user = "system:serviceaccount:gw:gateway";
        for (review, why) in [
            (answer(true, user, &sa, &["other"]), "audience"),
            (answer(true, user, &sa, &[]), "audience"),
            (answer(false, user, &sa, &["admitpilot"]), "authenticated"),
            (
                answer(true, "alice", &["system:authenticated"], &["admitpilot"]),
                "service account",
            ),
            (
                answer(true, "system:serviceaccount:gw", &sa, &["admitpilot"]),
                "user name",
            ),
        ] {
            let error = identity_of(&review, "admitpilot", "t").unwrap_err();
            assert!(error.to_string().contains(why), "{why}: {error}");
            assert_eq!(error.reason(), "invalid");
        }
    }

    #[test]
    fn expiry_is_read_from_the_claims_only_when_present() {
        assert_eq!(expiry("not-a-jwt"), None);
        assert_eq!(expiry(&jwt(serde_json::json!({"sub": "x"}))), None);
        assert_eq!(remaining(None), Duration::MAX);
        assert_eq!(
            remaining(Some(UNIX_EPOCH + Duration::from_secs(1))),
            Duration::ZERO
        );
    }
}
