//! The webhook's effect check: takes an object that passed validation and tells what admitting it would do to
//! the gateways, as a denial message (some gateway's Envoy would reject the resulting config) or warnings (parts
//! that would not take effect). The check itself is [`crate::translate::effect`], the same one that guards the
//! xDS push path; this module feeds it the live snapshot and the connected proxy groups, and words its answer.

use std::sync::Arc;

use tokio::sync::watch;

use crate::model::{ConfigObject, Snapshot};
pub use crate::translate::effect::GatewayEffect;
use crate::translate::effect::{describe_proxy, rejections_by_message, EffectChecker};
use crate::translate::{Options, Proxy};

/// What the webhook asks about an object it is about to admit.
pub trait GatewayCheck: Send + Sync {
    /// What admitting `object` would do to each gateway; empty when nothing is to be said (or the live config
    /// is not known yet).
    fn effects(&self, object: ConfigObject) -> Vec<GatewayEffect>;
}

/// Proxy groups that are connected now.
pub type ConnectedGroups = Arc<dyn Fn() -> Vec<Proxy> + Send + Sync>;

/// The effect check against the config the process serves: the latest snapshot of the watch loop, the groups
/// its Gateways select and the groups connected to its xDS server.
pub struct LiveGatewayCheck {
    checker: EffectChecker,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    connected: ConnectedGroups,
}

impl std::fmt::Debug for LiveGatewayCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveGatewayCheck")
            .field("checker", &self.checker)
            .finish_non_exhaustive()
    }
}

impl LiveGatewayCheck {
    /// Checks against what `snapshots` publishes, translating with `options` (those of the xDS server).
    pub fn new(
        options: Options,
        snapshots: watch::Receiver<Arc<Snapshot>>,
        connected: ConnectedGroups,
    ) -> Self {
        LiveGatewayCheck {
            checker: EffectChecker::new(options),
            snapshots,
            connected,
        }
    }
}

impl GatewayCheck for LiveGatewayCheck {
    fn effects(&self, object: ConfigObject) -> Vec<GatewayEffect> {
        let live = self.snapshots.borrow().clone();
        // Version 0: the sources have not synced yet, so the config the object joins is not known.
        if live.version == 0 {
            return Vec::new();
        }
        self.checker
            .check(&live, Arc::new(object), &(self.connected)())
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
    use crate::translate::dangling::{Effect, LeftOut};
    use crate::translate::effect::Rejection;

    fn proxy(app: &str) -> Proxy {
        Proxy {
            namespace: "higress-system".into(),
            labels: BTreeMap::from([("app".to_string(), app.to_string())]),
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
