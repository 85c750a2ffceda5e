//! exportTo (pure): takes an `exportTo` list and the kind it belongs to, records Istio's visibility errors.

use std::collections::BTreeSet;

use super::host::is_dns1123_label;
use admitpilot_model::Findings;

/// Which kind an `exportTo` list belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportToContext {
    /// VirtualService or DestinationRule without workload selector.
    Plain,
    /// ServiceEntry: `~` (visible to no one) is allowed, alone.
    ServiceEntry,
    /// DestinationRule with a workload selector: only the own namespace.
    DestinationRuleWithSelector,
}

/// Validates an `exportTo` list: `.`, `*`, `~` (ServiceEntry only) or DNS labels; no duplicates (`.` equals the
/// own namespace); `*` and `~` alone; a DestinationRule with selector only to its own namespace. Mirrors Istio's
/// `validateExportTo` and `visibility.Instance.Validate`, with their error texts.
pub fn validate_export_to(
    namespace: &str,
    export_to: &[String],
    context: ExportToContext,
    path: &str,
    out: &mut Findings,
) {
    if export_to.is_empty() {
        return;
    }
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for entry in export_to {
        let key = if entry == "." {
            namespace
        } else {
            entry.as_str()
        };
        if seen.contains(key) {
            if key != entry {
                out.error(
                    path,
                    format!("duplicate entries in exportTo: . and current namespace {namespace}"),
                );
            } else {
                out.error(
                    path,
                    format!("duplicate entries in exportTo for entry {entry}"),
                );
            }
            continue;
        }
        let error = match key {
            "~" if context == ExportToContext::ServiceEntry => None,
            "." | "*" => None,
            "~" => Some("exportTo ~ (none) is not allowed for Istio configuration objects"),
            _ if is_dns1123_label(key) => None,
            _ => Some("only .,*, or a valid DNS 1123 label is allowed as exportTo entry"),
        };
        match error {
            Some(error) => out.error(path, error),
            None => {
                seen.insert(key);
            }
        }
    }
    if context == ExportToContext::DestinationRuleWithSelector && !seen.is_empty() {
        if !seen.contains(namespace) {
            out.error(
                path,
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            );
        } else if seen.len() > 1 {
            out.error(
                path,
                "destination rule with workload selector cannot have multiple entries in exportTo",
            );
        }
    }
    if seen.contains("*") && export_to.len() > 1 {
        out.error(
            path,
            "cannot have both public (*) and non-public exportTo values for a resource",
        );
    }
    if seen.contains("~") && export_to.len() > 1 {
        out.error(
            path,
            "cannot export service entry to no one (~) and someone",
        );
    }
}
