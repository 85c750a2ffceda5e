//! AdmissionReview handling without HTTP: takes a request body (JSON bytes) and yields the AdmissionReview
//! response to send back, plus what metrics need to know; or a [`Error`] for bodies that are not a
//! usable AdmissionReview (the HTTP layer turns those into 400).
//!
//! Both `admission.k8s.io/v1` and `v1beta1` are read; the response uses the request's apiVersion and echoes
//! its `uid`. CREATE and UPDATE are validated with [`admitpilot_validate::validate_document`]; an object that passes
//! is then checked for its effect on the gateways when a [`GatewayCheck`] is given (denied when a gateway's Envoy
//! would reject the result, warned about what would not take effect). DELETE and CONNECT are allowed untouched.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::effects::{self, GatewayCheck};
use admitpilot_model::decode::DecodeOptions;
use admitpilot_model::{Finding, Kind};
use admitpilot_validate::enforcement::unenforced;
use admitpilot_validate::references::Reference;
use admitpilot_validate::{validate_document, Report};

/// The AdmissionReview API versions the webhook accepts (and answers in).
pub const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// The prefix of every denial message (the API server shows it after "denied the request:").
pub const DENIAL_PREFIX: &str = "configuration is invalid: ";

/// Why a body could not be reviewed at all; answered with HTTP 400 and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The body was empty.
    #[error("request body is empty; expected an AdmissionReview")]
    EmptyBody,
    /// The body is not JSON, or not shaped like an AdmissionReview.
    #[error("request body is not a valid AdmissionReview: {0}")]
    Malformed(String),
    /// `apiVersion`/`kind` are not an AdmissionReview version the webhook speaks.
    #[error("unsupported review type {api_version}/{kind}; expected kind AdmissionReview in admission.k8s.io/v1 or v1beta1")]
    UnsupportedType {
        /// `apiVersion` as sent.
        api_version: String,
        /// `kind` as sent.
        kind: String,
    },
    /// The review has no `request` object.
    #[error("AdmissionReview has no request")]
    MissingRequest,
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the API server asks to do with the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// Create an object (validated).
    Create,
    /// Update an object (validated).
    Update,
    /// Delete an object (always allowed).
    Delete,
    /// Connect to a subresource (always allowed).
    Connect,
}

impl Operation {
    /// Returns the operation as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Group/version/kind of the object under review.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind name.
    #[serde(default)]
    pub kind: String,
}

/// The parts of `AdmissionReview.request` the webhook reads (other fields are ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionRequest {
    uid: String,
    kind: GroupVersionKind,
    operation: Operation,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    object: Option<Value>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionReviewIn {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<AdmissionRequest>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: AdmissionResponse<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Debug, Serialize)]
struct Status<'a> {
    message: &'a str,
}

/// Why a request was denied (a metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenialReason {
    /// CREATE/UPDATE without an `object`.
    MissingObject,
    /// The object did not decode (wrong types, unknown top-level fields, bad metadata).
    DecodeError,
    /// The object decoded but breaks validation rules.
    InvalidResource,
    /// The object is valid alone, but a gateway's Envoy would reject the config it makes.
    WouldBeRejected,
    /// The object names what the config lacks (`--reference-check=deny`).
    BrokenReference,
}

impl DenialReason {
    /// Returns the label value used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialReason::MissingObject => "missing_object",
            DenialReason::DecodeError => "decode_error",
            DenialReason::InvalidResource => "invalid_resource",
            DenialReason::WouldBeRejected => "would_be_rejected",
            DenialReason::BrokenReference => "broken_reference",
        }
    }
}

/// The decision on one review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Validated and admitted (possibly with warnings).
    Allowed,
    /// Admitted without validation: DELETE/CONNECT, other ConfigMaps, kinds admitpilot does not handle.
    Skipped,
    /// Rejected.
    Denied(DenialReason),
}

/// One answered review: the response body and the facts metrics and logs need.
#[derive(Debug, Clone)]
pub struct Reviewed {
    /// The AdmissionReview response, serialized.
    pub body: Vec<u8>,
    /// The decision.
    pub verdict: Verdict,
    /// The operation reviewed.
    pub operation: Operation,
    /// The recognised kind of the object, from the request's group and kind.
    pub kind: Option<Kind>,
    /// `request.dryRun`: it does not change the decision, only metrics and logs.
    pub dry_run: bool,
    /// `request.namespace`, for logs.
    pub namespace: Option<String>,
    /// `request.name` (absent on CREATE with generateName), for logs.
    pub name: Option<String>,
    /// The denial message sent in `status.message`; `None` when allowed.
    pub message: Option<String>,
    /// The warnings sent back.
    pub warnings: Vec<String>,
}

impl Reviewed {
    /// `namespace/name` of the object (or what of it the request names), for logs.
    pub fn object_name(&self) -> String {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(name)) if !ns.is_empty() => format!("{ns}/{name}"),
            (_, Some(name)) => name.clone(),
            _ => String::new(),
        }
    }
}

/// Reviews one AdmissionReview body.
///
/// The body is parsed once: the review's own fields into typed fields and the object into one [`Value`] that
/// the validator reads in place. The path-tracking parser only runs again when the body is malformed, to name
/// the field in the error.
pub fn review(
    body: &[u8],
    options: &DecodeOptions,
    gateways: Option<&dyn GatewayCheck>,
) -> Result<Reviewed, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::EmptyBody);
    }
    let parsed: AdmissionReviewIn = serde_json::from_slice(body).map_err(|_| malformed(body))?;
    let api_version = API_VERSIONS
        .into_iter()
        .find(|v| *v == parsed.api_version)
        .filter(|_| parsed.kind == "AdmissionReview")
        .ok_or_else(|| Error::UnsupportedType {
            api_version: parsed.api_version.clone(),
            kind: parsed.kind.clone(),
        })?;
    let request = parsed.request.ok_or(Error::MissingRequest)?;
    Ok(decide(api_version, request, options, gateways))
}

/// Parses a body that failed the fast parse again, tracking the path, and describes where it went wrong.
fn malformed(body: &[u8]) -> Error {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let message = match serde_path_to_error::deserialize::<_, AdmissionReviewIn>(&mut deserializer)
    {
        Ok(_) => match deserializer.end() {
            Ok(()) => "cannot be parsed".to_string(),
            Err(error) => error.to_string(),
        },
        Err(error) => {
            let path = error.path().to_string();
            if path.is_empty() || path == "." {
                error.inner().to_string()
            } else {
                format!("{path}: {}", error.inner())
            }
        }
    };
    Error::Malformed(message)
}

fn decide(
    api_version: &str,
    request: AdmissionRequest,
    options: &DecodeOptions,
    gateways: Option<&dyn GatewayCheck>,
) -> Reviewed {
    let kind = Kind::from_group_kind(&request.kind.group, &request.kind.kind);
    let (verdict, status, warnings) = match request.operation {
        Operation::Delete | Operation::Connect => (Verdict::Skipped, None, Vec::new()),
        Operation::Create | Operation::Update => match request.object {
            None => (
                Verdict::Denied(DenialReason::MissingObject),
                Some(format!(
                    "{DENIAL_PREFIX}request.object: {} request carries no object",
                    request.operation.as_str()
                )),
                Vec::new(),
            ),
            Some(mut object) => {
                fill_namespace(&mut object, request.namespace.as_deref());
                let report = validate_document(&object, options);
                let judged = judge(&report, &request.kind);
                match (judged.0, gateways, report.object) {
                    (Verdict::Allowed, Some(gateways), Some(object)) => {
                        judge_effects(judged, &gateways.check(object))
                    }
                    _ => judged,
                }
            }
        },
    };
    let response = AdmissionReviewOut {
        api_version,
        kind: "AdmissionReview",
        response: AdmissionResponse {
            uid: &request.uid,
            allowed: !matches!(verdict, Verdict::Denied(_)),
            status: status.as_deref().map(|message| Status { message }),
            warnings: &warnings,
        },
    };
    // A typical response is under 200 bytes; warnings and denial messages add their length.
    let mut body = Vec::with_capacity(
        160 + request.uid.len()
            + status.as_ref().map_or(0, String::len)
            + warnings.iter().map(|w| w.len() + 3).sum::<usize>(),
    );
    // Serializing plain strings and bools into a Vec cannot fail; an empty body would be rejected anyway.
    if serde_json::to_writer(&mut body, &response).is_err() {
        body.clear();
    }
    Reviewed {
        body,
        verdict,
        operation: request.operation,
        kind,
        dry_run: request.dry_run.unwrap_or(false),
        namespace: request.namespace,
        name: request.name,
        message: status,
        warnings,
    }
}

/// The API server may leave `metadata.namespace` out of a namespaced object on CREATE; the request names it.
fn fill_namespace(object: &mut Value, namespace: Option<&str>) {
    let Some(namespace) = namespace.filter(|ns| !ns.is_empty()) else {
        return;
    };
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let missing = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if missing {
            metadata.insert("namespace".into(), Value::String(namespace.into()));
        }
    }
}

fn judge(report: &Report, gvk: &GroupVersionKind) -> (Verdict, Option<String>, Vec<String>) {
    if report.unrecognized {
        // Other ConfigMaps are not admitpilot's business: allowed without remarks.
        let warnings = if gvk.group.is_empty() && gvk.kind == "ConfigMap" {
            Vec::new()
        } else {
            vec![format!(
                "admitpilot does not validate {}; allowed without checks",
                describe_gvk(gvk)
            )]
        };
        return (Verdict::Skipped, None, warnings);
    }
    let mut warnings: Vec<String> = report.warnings().map(finding_text).collect();
    if let Some(part) = report.object.as_ref().and_then(unenforced) {
        warnings.push(part.to_string());
    }
    if report.is_valid() {
        return (Verdict::Allowed, None, warnings);
    }
    let errors: Vec<String> = report.errors().map(finding_text).collect();
    let reason = if report.object.is_some() {
        DenialReason::InvalidResource
    } else {
        DenialReason::DecodeError
    };
    let message = format!("{DENIAL_PREFIX}{}", errors.join("; "));
    (Verdict::Denied(reason), Some(message), warnings)
}

/// Adds what the object would do to the whole config to the judgement of a valid object.
fn judge_effects(
    (verdict, status, mut warnings): (Verdict, Option<String>, Vec<String>),
    effects: &effects::ConfigEffects,
) -> (Verdict, Option<String>, Vec<String>) {
    warnings.extend(effects::warnings(&effects.gateways));
    let references = effects.references.iter().map(ToString::to_string);
    if let Some(denial) = effects::denial(&effects.gateways) {
        warnings.extend(references);
        return (
            Verdict::Denied(DenialReason::WouldBeRejected),
            Some(format!("{DENIAL_PREFIX}{denial}")),
            warnings,
        );
    }
    if effects.deny_references && effects.references.iter().any(Reference::may_deny) {
        let message = references.collect::<Vec<_>>().join("; ");
        return (
            Verdict::Denied(DenialReason::BrokenReference),
            Some(format!("{DENIAL_PREFIX}{message}")),
            warnings,
        );
    }
    warnings.extend(references);
    (verdict, status, warnings)
}

fn describe_gvk(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
    }
}

/// Formats a finding as `field: message` (or just the message when it concerns the whole object).
fn finding_text(finding: &Finding) -> String {
    if finding.field.is_empty() {
        finding.message.clone()
    } else {
        format!("{}: {}", finding.field, finding.message)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(api_version: &str, operation: &str, object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
                "operation": operation,
                "namespace": "default",
                "name": "vs",
                "object": object,
            }
        }))
        .unwrap()
    }

    fn vs(spec: Value) -> Value {
        json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "vs"},
            "spec": spec,
        })
    }

    fn response(reviewed: &Reviewed) -> Value {
        serde_json::from_slice(&reviewed.body).unwrap()
    }

    #[test]
    fn answers_in_the_request_api_version_and_echoes_uid() {
        for version in API_VERSIONS {
            let out = review(
                &body(version, "CREATE", vs(json!({}))),
                &DecodeOptions::default(),
                None,
            )
            .unwrap();
            let value = response(&out);
            assert_eq!(value["apiVersion"], version);
            assert_eq!(value["kind"], "AdmissionReview");
            assert_eq!(value["response"]["uid"], "u-1");
        }
    }

    #[test]
    fn denies_decode_errors_with_the_field_path() {
        let mut object = vs(json!({}));
        object["metadata"]["name"] = json!(5);
        let out = review(
            &body(API_VERSIONS[0], "UPDATE", object),
            &DecodeOptions::default(),
            None,
        )
        .unwrap();
        assert_eq!(out.verdict, Verdict::Denied(DenialReason::DecodeError));
        let message = response(&out)["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.starts_with(DENIAL_PREFIX), "{message}");
        assert!(message.contains("metadata.name"), "{message}");
    }

    #[test]
    fn fills_the_namespace_from_the_request() {
        let mut object = json!({"metadata": {"name": "x"}});
        fill_namespace(&mut object, Some("ns"));
        assert_eq!(object["metadata"]["namespace"], "ns");
        let mut object = json!({"metadata": {"name": "x", "namespace": "kept"}});
        fill_namespace(&mut object, Some("ns"));
        assert_eq!(object["metadata"]["namespace"], "kept");
    }

    #[test]
    fn rejects_bodies_that_are_not_reviews() {
        let options = DecodeOptions::default();
        assert_eq!(review(b"  ", &options, None).unwrap_err(), Error::EmptyBody);
        assert!(matches!(
            review(b"{", &options, None),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            review(br#"{"apiVersion":"v1","kind":"Pod"}"#, &options, None),
            Err(Error::UnsupportedType { .. })
        ));
        assert_eq!(
            review(
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                &options,
                None
            )
            .unwrap_err(),
            Error::MissingRequest
        );
        let err = review(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{},"operation":"PATCH"}}"#,
            &options,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("request.operation"), "{err}");
    }
}
