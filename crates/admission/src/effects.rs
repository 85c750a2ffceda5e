//! The webhook's whole-config checks: takes an object that passed validation and tells what admitting it would do,
//! as a denial message or warnings:
//! - to the gateways ([`admitpilot_translate::effect`], the same check that guards the xDS push path): denied when a
//!   gateway's Envoy would reject the resulting config, warned about parts that would not take effect;
//! - to references ([`admitpilot_validate::references`]): what it names that the config lacks, with Istio's analyzer
//!   codes; warned about, denied, or not checked ([`ReferenceCheck`]).
//!
//! This module feeds both the live snapshot and the connected proxy groups, and words their answers.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::metrics::WebhookMetrics;
use admitpilot_model::{ConfigObject, Snapshot};
pub use admitpilot_translate::effect::GatewayEffect;
use admitpilot_translate::effect::{
    candidate, describe_proxy, rejections_by_message, EffectChecker,
};
use admitpilot_translate::{Options, Proxy};
use admitpilot_validate::references::{check_references, HostClaims, Reference};

/// What to do with reference findings (`--reference-check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReferenceCheck {
    /// Admit, with a warning per finding.
    #[default]
    Warn,
    /// Deny.
    Deny,
    /// Do not look.
    Off,
}

impl std::str::FromStr for ReferenceCheck {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "warn" => Ok(ReferenceCheck::Warn),
            "deny" => Ok(ReferenceCheck::Deny),
            "off" => Ok(ReferenceCheck::Off),
            other => Err(format!("`{other}` is not one of warn, deny, off")),
        }
    }
}

/// What admitting one object would do to the whole config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigEffects {
    /// Per gateway: what Envoy would reject, and what would not take effect.
    pub gateways: Vec<GatewayEffect>,
    /// What the object names that the config lacks.
    pub references: Vec<Reference>,
    /// Whether reference findings deny the request.
    pub deny_references: bool,
}

/// What the webhook asks about an object it is about to admit.
pub trait GatewayCheck: Send + Sync {
    /// What admitting `object` would do; empty when nothing is to be said (or the live config is not known yet).
    fn check(&self, object: ConfigObject) -> ConfigEffects;
}

/// Proxy groups that are connected now.
pub type ConnectedGroups = Arc<dyn Fn() -> Vec<Proxy> + Send + Sync>;

/// The effect check against the config the process serves: the latest snapshot of the watch loop, the groups
/// its Gateways select and the groups connected to its xDS server.
pub struct LiveGatewayCheck {
    checker: EffectChecker,
    domain_suffix: String,
    references: ReferenceCheck,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    connected: ConnectedGroups,
    metrics: WebhookMetrics,
    /// The host claims of the live snapshot of this version, built once per version for the reference check.
    claims: Mutex<Option<(u64, Arc<HostClaims>)>>,
}

impl std::fmt::Debug for LiveGatewayCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveGatewayCheck")
            .field("checker", &self.checker)
            .finish_non_exhaustive()
    }
}

impl LiveGatewayCheck {
    /// Checks against what `snapshots` publishes, translating with `options` (those of the xDS server), and
    /// handles reference findings as `references` says; each check's time goes to `metrics`.
    pub fn new(
        options: Options,
        references: ReferenceCheck,
        snapshots: watch::Receiver<Arc<Snapshot>>,
        connected: ConnectedGroups,
        metrics: WebhookMetrics,
    ) -> Self {
        LiveGatewayCheck {
            domain_suffix: options.domain_suffix.clone(),
            checker: EffectChecker::new(options),
            references,
            snapshots,
            connected,
            metrics,
            claims: Mutex::default(),
        }
    }

    /// The host claims of `live` (which a candidate differs from only in the object it replaces).
    fn claims(&self, live: &Snapshot) -> Arc<HostClaims> {
        let mut held = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        match &*held {
            Some((version, claims)) if *version == live.version => Arc::clone(claims),
            _ => {
                let claims = Arc::new(HostClaims::new(live, &self.domain_suffix));
                *held = Some((live.version, Arc::clone(&claims)));
                claims
            }
        }
    }
}

impl GatewayCheck for LiveGatewayCheck {
    fn check(&self, object: ConfigObject) -> ConfigEffects {
        let live = self.snapshots.borrow().clone();
        // Version 0: the sources have not synced yet, so the config the object joins is not known.
        if live.version == 0 {
            return ConfigEffects::default();
        }
        let started = std::time::Instant::now();
        let object = Arc::new(object);
        let candidate = candidate(&live, object.clone());
        let references = match self.references {
            ReferenceCheck::Off => Vec::new(),
            ReferenceCheck::Warn | ReferenceCheck::Deny => check_references(
                &candidate,
                &object,
                &self.domain_suffix,
                Some(&self.claims(&live)),
            ),
        };
        let effects = ConfigEffects {
            gateways: self
                .checker
                .check_candidate(&live, &candidate, &(self.connected)()),
            references,
            deny_references: self.references == ReferenceCheck::Deny,
        };
        self.metrics
            .observe_effect_check(started.elapsed().as_secs_f64());
        effects
    }
}

/// The denial message (without the common prefix) when some gateway would reject the change: each rejection
/// once, with the gateways it applies to, e.g. `would be rejected by gateway higress-system {app=higress}:
/// listener 0.0.0.0_80: …: value must be inside range (0, 8192] (Envoy rule uint32.lte)`.
pub fn denial(effects: &[GatewayEffect]) -> Option<String> {
    let by_message = rejections_by_message(effects);
    if by_message.is_empty() {
        return None;
    }
    let parts: Vec<String> = by_message
        .into_iter()
        .map(|(rejection, gateways)| {
            let noun = if gateways.len() == 1 {
                "gateway"
            } else {
                "gateways"
            };
            format!(
                "would be rejected by {noun} {}: {rejection}",
                gateways.join(", ")
            )
        })
        .collect();
    Some(parts.join("; "))
}

/// One warning per part of the change that would not take effect on a gateway (it names a cluster the gateway
/// does not get), saying what will happen instead.
pub fn warnings(effects: &[GatewayEffect]) -> Vec<String> {
    effects
        .iter()
        .flat_map(|effect| {
            let gateway = describe_proxy(&effect.proxy);
            effect.left_out.iter().map(move |item| {
                format!(
                    "gateway {gateway}: {} of {} names clusters that do not exist ({}): {}",
                    item.feature,
                    item.resource,
                    item.missing.join(", "),
                    item.effect
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use admitpilot_translate::dangling::{Effect, LeftOut};
    use admitpilot_translate::effect::Rejection;

    fn proxy(app: &str) -> Proxy {
        Proxy {
            namespace: "higress-system".into(),
            labels: BTreeMap::from([("app".to_string(), app.to_string())]),
            ..Default::default()
        }
    }

    fn rejected(app: &str) -> GatewayEffect {
        GatewayEffect {
            proxy: proxy(app),
            rejections: vec![Rejection {
                resource: "listener 0.0.0.0_80".into(),
                path: "filter_chains[0].filters[0].typed_config.max_request_headers_kb".into(),
                message: "value must be inside range (0, 8192]".into(),
            }],
            left_out: Vec::new(),
        }
    }

    #[test]
    fn one_rejection_names_every_gateway_it_applies_to() {
        assert_eq!(denial(&[]), None);
        let message = denial(&[rejected("a"), rejected("b")]).unwrap_or_default();
        assert_eq!(
            message,
            "would be rejected by gateways higress-system {app=a}, higress-system {app=b}: listener 0.0.0.0_80: \
             filter_chains[0].filters[0].typed_config.max_request_headers_kb: value must be inside range (0, 8192]"
        );
    }

    #[test]
    fn what_would_not_take_effect_is_a_warning() {
        let effect = GatewayEffect {
            proxy: proxy("gw"),
            rejections: Vec::new(),
            left_out: vec![LeftOut {
                resource: "listener 0.0.0.0_80".into(),
                feature: "tracing (envoy.tracers.zipkin)".into(),
                missing: vec!["outbound|9411||zipkin.istio-system.svc.cluster.local".into()],
                effect: Effect::LeftOut,
                blame: Vec::new(),
            }],
        };
        assert_eq!(
            warnings(&[effect]),
            ["gateway higress-system {app=gw}: tracing (envoy.tracers.zipkin) of listener 0.0.0.0_80 names \
              clusters that do not exist (outbound|9411||zipkin.istio-system.svc.cluster.local): left out until \
              the clusters exist"]
        );
    }
}
