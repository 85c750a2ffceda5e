//! What admitpilot admits: takes generated documents one at a time and yields, for each, whether it is admitted
//! into the config it joins, as the webhook decides: the sources' validation gate
//! ([`admitpilot::source::admit::admit`]), then the effect check against the config so far
//! ([`EffectChecker::check_candidate`], the webhook's check, for the gateways the config's Gateways select and the
//! base gateway as a connected group). Only admitted objects join the config.

use std::sync::Arc;

use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::{ConfigObject, Snapshot};
use admitpilot::source::admit::{admit, Verdict};
use admitpilot::source::AdmitOptions;
use admitpilot::translate::effect::EffectChecker;
use admitpilot::translate::{Options, Proxy};
use serde_json::Value;

/// The verdict on one document.
pub enum Outcome {
    /// Admitted; it joined the config.
    Admitted(Arc<ConfigObject>),
    /// Refused by validation (the first error).
    Invalid(String),
    /// Valid, but the effect check refused it (the first rejection, naming the gateway).
    Refused(String),
    /// Not a kind admitpilot handles.
    Ignored,
}

/// Admits documents into a growing config.
pub struct Admission {
    options: AdmitOptions,
    checker: EffectChecker,
    proxy: Proxy,
    live: Snapshot,
}

impl Admission {
    /// Admission into `base`, for the gateway group `proxy`.
    pub fn new(base: Snapshot, proxy: Proxy) -> Admission {
        Admission {
            options: AdmitOptions {
                decode: DecodeOptions::default(),
                default_namespace: "default".into(),
            },
            checker: EffectChecker::new(Options::default()),
            proxy,
            live: base,
        }
    }

    /// Starts again from `base` (given a version newer than any so far, as the effect check expects).
    pub fn reset(&mut self, base: Snapshot) {
        let version = self.live.version + 1;
        self.live = base;
        self.live.version = version;
    }

    /// The config so far.
    pub fn live(&self) -> &Snapshot {
        &self.live
    }

    /// Decides on `doc`; an admitted object joins the config.
    pub fn offer(&mut self, doc: Value) -> Outcome {
        match admit(doc, &self.options, &|_| None) {
            Verdict::Accept { object, .. } => {
                let object = Arc::new(*object);
                let mut candidate = self.live.clone();
                candidate.version += 1;
                candidate.objects.insert(object.key(), Arc::clone(&object));
                let effects = self.checker.check_candidate(
                    &self.live,
                    &candidate,
                    std::slice::from_ref(&self.proxy),
                );
                let refused = effects.iter().find_map(|effect| {
                    effect.rejections.first().map(|rejection| {
                        format!(
                            "gateway {}: {rejection}",
                            admitpilot::translate::effect::describe_proxy(&effect.proxy)
                        )
                    })
                });
                match refused {
                    Some(why) => Outcome::Refused(why),
                    None => {
                        self.live = candidate;
                        Outcome::Admitted(object)
                    }
                }
            }
            Verdict::Reject { errors, .. } => {
                Outcome::Invalid(errors.first().map(ToString::to_string).unwrap_or_default())
            }
            Verdict::Ignore => Outcome::Ignored,
        }
    }
}
