//! BackendTLSPolicy rules (pure): takes a BackendTLSPolicy spec, records the CRD's CEL failures (each named by its
//! message) with the API server's text.

use super::common::{cel, ARRAY, OBJECT};
use admitpilot_model::gateway_api::common::LocalReference;
use admitpilot_model::gateway_api::BackendTlsPolicy;
use admitpilot_model::Findings;

/// Checks a BackendTLSPolicy spec.
pub fn validate(policy: &BackendTlsPolicy, out: &mut Findings) {
    let refs = &policy.target_refs;
    let no_section = |r: &LocalReference| r.section_name.as_deref().is_none_or(str::is_empty);
    let same = |a: &LocalReference, b: &LocalReference| {
        a.group == b.group && a.kind == b.kind && a.name == b.name
    };
    if refs.iter().any(|a| {
        refs.iter()
            .any(|b| same(a, b) && no_section(a) != no_section(b))
    }) {
        cel(
            out,
            "spec.targetRefs",
            ARRAY,
            "sectionName must be specified when targetRefs includes 2 or more references to the same target",
        );
    }
    let unique = refs.iter().all(|a| {
        refs.iter()
            .filter(|b| {
                same(a, b) && ((no_section(a) && no_section(b)) || a.section_name == b.section_name)
            })
            .count()
            == 1
    });
    if !unique {
        cel(
            out,
            "spec.targetRefs",
            ARRAY,
            "sectionName must be unique when targetRefs includes 2 or more references to the same target",
        );
    }
    let validation = &policy.validation;
    let has_refs = !validation.ca_certificate_refs.is_empty();
    let has_well_known = validation
        .well_known_ca_certificates
        .as_deref()
        .is_some_and(|w| !w.is_empty());
    if has_refs && has_well_known {
        cel(
            out,
            "spec.validation",
            OBJECT,
            "must not contain both CACertificateRefs and WellKnownCACertificates",
        );
    }
    if !has_refs && !has_well_known {
        cel(
            out,
            "spec.validation",
            OBJECT,
            "must specify either CACertificateRefs or WellKnownCACertificates",
        );
    }
    for (i, san) in validation.subject_alt_names.iter().enumerate() {
        let at = format!("spec.validation.subjectAltNames[{i}]");
        let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
        let rules = [
            (
                san.san_type == "Hostname" && !set(&san.hostname),
                "SubjectAltName element must contain Hostname, if Type is set to Hostname",
            ),
            (
                san.san_type != "Hostname" && set(&san.hostname),
                "SubjectAltName element must not contain Hostname, if Type is not set to Hostname",
            ),
            (
                san.san_type == "URI" && !set(&san.uri),
                "SubjectAltName element must contain URI, if Type is set to URI",
            ),
            (
                san.san_type != "URI" && set(&san.uri),
                "SubjectAltName element must not contain URI, if Type is not set to URI",
            ),
        ];
        for (_, message) in rules.iter().filter(|(fails, _)| *fails) {
            cel(out, &at, OBJECT, message);
        }
    }
}
