//! Metadata (pure): takes an object's kind and metadata, records Istio's and Kubernetes' name, namespace, label and
//! annotation errors.

use super::host::DNS1123_LABEL_MAX;
use super::labels::is_alnum_bounded;
use super::text::go_quote;
use admitpilot_model::Findings;
use admitpilot_model::Kind;
use admitpilot_model::ObjectMeta;

/// Annotation that turns an AuthorizationPolicy into a dry run.
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";
/// Annotation that makes the webhook reject the object (used to probe that validation works).
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";
/// Internal annotations users may not set (they would escalate privileges).
pub const INTERNAL_ANNOTATIONS: &[&str] = &[
    "internal.istio.io/parent-namespace",
    "internal.istio.io/parents",
];

/// Checks metadata rules every Istio kind shares (Istio's `validateMetadata`): `istio.io/dry-run` only on
/// AuthorizationPolicy with a boolean value (the policy validator checks the action), the always-reject
/// annotation rejects, and internal annotations are refused. ConfigMaps and Kubernetes kinds are skipped.
pub fn validate_metadata(kind: Kind, meta: &ObjectMeta, out: &mut Findings) {
    if matches!(
        kind,
        Kind::HigressConfig
            | Kind::MeshConfig
            | Kind::ReferencedConfigMap
            | Kind::Namespace
            | Kind::Service
            | Kind::EndpointSlice
            | Kind::Secret
    ) {
        return;
    }
    // The API server checks these before any webhook sees the object (apimachinery `ValidateObjectMetaAccessor`,
    // `pkg/api/validation/objectmeta.go`: the name with `NameIsDNSSubdomain`, i.e. `IsDNS1123Subdomain`, the
    // namespace with `ValidateNamespaceName`, i.e. `IsDNS1123Label`), one `field.Invalid` per text.
    if !meta.name.is_empty() {
        for text in dns1123_subdomain_errors(&meta.name) {
            out.error("metadata.name", field_invalid(&meta.name, text));
        }
    }
    if !meta.namespace.is_empty() {
        for text in dns1123_label_errors(&meta.namespace) {
            out.error("metadata.namespace", field_invalid(&meta.namespace, text));
        }
    }
    super::object_meta::validate_labels(&meta.labels, out);
    super::object_meta::validate_annotations(&meta.annotations, out);
    // Istio's annotation rules are Istio's: Gateway API objects only get the API server's name checks.
    if kind.is_gateway_api() {
        return;
    }
    if let Some(value) = meta.annotations.get(DRY_RUN_ANNOTATION) {
        let path = format!("metadata.annotations.{DRY_RUN_ANNOTATION}");
        if kind != Kind::AuthorizationPolicy {
            out.error(
                path,
                format!("annotation {DRY_RUN_ANNOTATION} is only supported on AuthorizationPolicy; remove it"),
            );
        } else if !is_go_bool(value) {
            out.error(
                path,
                format!("annotation {DRY_RUN_ANNOTATION} must be a boolean, got {value:?}"),
            );
        }
    }
    if meta.annotations.contains_key(ALWAYS_REJECT_ANNOTATION) {
        out.error(
            format!("metadata.annotations.{ALWAYS_REJECT_ANNOTATION}"),
            format!("annotation {ALWAYS_REJECT_ANNOTATION} is set: the object is always rejected"),
        );
    }
    for internal in INTERNAL_ANNOTATIONS {
        if meta.annotations.contains_key(*internal) {
            out.error(
                format!("metadata.annotations.{internal}"),
                format!("annotation {internal} is internal and may not be set by users"),
            );
        }
    }
}

/// apimachinery's `dns1123SubdomainErrorMsg` as its `RegexError` renders it (with the example and the regular
/// expression): the text of `IsDNS1123Subdomain` for a name that is not a lowercase RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// apimachinery's `dns1123LabelErrMsg` as its `RegexError` renders it (two examples, hence the doubled space):
/// the text of `IsDNS1123Label` for a value that is not a lowercase RFC 1123 label.
pub const DNS1123_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// apimachinery's `IsDNS1123Label` text for a valid subdomain that has dots.
pub const DNS1123_LABEL_DOTS_ERROR: &str = "must not contain dots";
/// apimachinery's `MaxLenError(DNS1123SubdomainMaxLength)`.
pub const DNS1123_SUBDOMAIN_LENGTH_ERROR: &str = "must be no more than 253 characters";
/// apimachinery's `MaxLenError(DNS1123LabelMaxLength)`.
pub const DNS1123_LABEL_LENGTH_ERROR: &str = "must be no more than 63 characters";

/// Longest lowercase RFC 1123 subdomain (apimachinery's `DNS1123SubdomainMaxLength`).
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// Whether `s` is a lowercase RFC 1123 label of any length (apimachinery's `dns1123LabelFmt`,
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`).
fn matches_lowercase_label(s: &str) -> bool {
    is_alnum_bounded(s, b"-") && !s.bytes().any(|c| c.is_ascii_uppercase())
}

/// Whether `s` is dot-separated lowercase labels of any length (apimachinery's `dns1123SubdomainFmt`): no 63-character
/// limit per part (that limit belongs to `IsDNS1123Label`).
fn matches_lowercase_subdomain(s: &str) -> bool {
    s.split('.').all(matches_lowercase_label)
}

/// apimachinery's `IsDNS1123Subdomain` (`pkg/util/validation/validation.go`), with its texts in its order: at most
/// 253 characters, then the pattern. Empty when `s` is a valid Kubernetes object name.
pub fn dns1123_subdomain_errors(s: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(DNS1123_SUBDOMAIN_LENGTH_ERROR);
    }
    if !matches_lowercase_subdomain(s) {
        errors.push(DNS1123_SUBDOMAIN_ERROR);
    }
    errors
}

/// apimachinery's `IsDNS1123Label` (`pkg/util/validation/validation.go`), with its texts in its order: at most 63
/// characters, then the pattern, reported as "must not contain dots" when `s` is a valid subdomain. Empty when `s`
/// is a valid namespace name.
pub fn dns1123_label_errors(s: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errors.push(DNS1123_LABEL_LENGTH_ERROR);
    }
    if !matches_lowercase_label(s) {
        errors.push(if matches_lowercase_subdomain(s) {
            DNS1123_LABEL_DOTS_ERROR
        } else {
            DNS1123_LABEL_ERROR
        });
    }
    errors
}

/// The text of an apimachinery `field.Invalid` error for a string value, without the field path
/// (`field.Error.ErrorBody`): `Invalid value: "<value as %q>": <detail>`.
pub fn field_invalid(value: &str, detail: &str) -> String {
    format!("Invalid value: {}: {detail}", go_quote(value))
}

/// The text of an apimachinery `field.TooLong` error, without the field path (`field.Error.ErrorBody`), as the API
/// server reports a CRD `maxLength` failure: `Too long: may not be more than <n> bytes`.
pub fn field_too_long(max: usize) -> String {
    let unit = if max == 1 { "byte" } else { "bytes" };
    format!("Too long: may not be more than {max} {unit}")
}

/// Tells whether `s` is a valid Kubernetes object name: apimachinery's `IsDNS1123Subdomain` accepts it (1–253
/// characters; see [`dns1123_subdomain_errors`]).
pub fn is_k8s_object_name(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX && matches_lowercase_subdomain(s)
}

/// Tells whether `s` is a lowercase RFC 1123 label (Kubernetes namespace names): apimachinery's `IsDNS1123Label`
/// accepts it (at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric; see
/// [`dns1123_label_errors`]). Unlike Istio's `labels.IsDNS1123Label`
/// ([`is_dns1123_label`](super::host::is_dns1123_label)), upper case is refused.
pub fn is_k8s_namespace(s: &str) -> bool {
    s.len() <= DNS1123_LABEL_MAX && matches_lowercase_label(s)
}

/// Tells whether `s` is a boolean as Go's strconv.ParseBool reads it.
pub fn is_go_bool(s: &str) -> bool {
    admitpilot_model::parse_go_bool(s).is_some()
}
