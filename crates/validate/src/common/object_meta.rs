//! The API server's label and annotation rules (pure): takes `metadata.labels` / `metadata.annotations`, yields
//! apimachinery's errors with its texts: `ValidateLabels` (`pkg/apis/meta/v1/validation`: each key an
//! `IsQualifiedName`, each value an `IsValidLabelValue`) and `ValidateAnnotations` (`pkg/api/validation/objectmeta.go`:
//! each key, lowercased, an `IsQualifiedName`; all of them at most 256 KiB). The API server checks these before any
//! webhook, so an object that fails them never reaches admitpilot from a cluster; the CLIs and folder mode see them.

use std::collections::BTreeMap;

use super::labels::is_alnum_bounded;
use super::metadata::{dns1123_subdomain_errors, field_invalid, field_too_long};
use admitpilot_model::Findings;

/// apimachinery's `qualifiedNameErrMsg` as `RegexError` renders it (three examples, hence the doubled spaces).
const QUALIFIED_NAME_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
/// apimachinery's `labelValueErrMsg` as `RegexError` renders it.
const LABEL_VALUE_ERROR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// apimachinery's `qualifiedNameMaxLength` and `LabelValueMaxLength`.
const NAME_PART_MAX: usize = 63;
/// apimachinery's `TotalAnnotationSizeLimitB`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// apimachinery's `IsQualifiedName`, its texts in its order.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|text| format!("prefix part {text}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > NAME_PART_MAX {
        errors.push(format!(
            "name part must be no more than {NAME_PART_MAX} characters"
        ));
    }
    if !is_alnum_bounded(name, b"-_.") {
        errors.push(format!("name part {QUALIFIED_NAME_ERROR}"));
    }
    errors
}

/// apimachinery's `IsValidLabelValue`, its texts in its order.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > NAME_PART_MAX {
        errors.push(format!("must be no more than {NAME_PART_MAX} characters"));
    }
    if !value.is_empty() && !is_alnum_bounded(value, b"-_.") {
        errors.push(LABEL_VALUE_ERROR.to_string());
    }
    errors
}

/// `ValidateLabels`: one `field.Invalid` at `metadata.labels` per text.
pub fn validate_labels(labels: &BTreeMap<String, String>, out: &mut Findings) {
    for (key, value) in labels {
        for text in qualified_name_errors(key) {
            out.error("metadata.labels", field_invalid(key, &text));
        }
        for text in label_value_errors(value) {
            out.error("metadata.labels", field_invalid(value, &text));
        }
    }
}

/// `ValidateAnnotations`: keys as qualified names (case aside), then the total size.
pub fn validate_annotations(annotations: &BTreeMap<String, String>, out: &mut Findings) {
    for key in annotations.keys() {
        for text in qualified_name_errors(&key.to_ascii_lowercase()) {
            out.error("metadata.annotations", field_invalid(key, &text));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > ANNOTATIONS_MAX_BYTES {
        out.error(
            "metadata.annotations",
            field_too_long(ANNOTATIONS_MAX_BYTES),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label_errors(key: &str, value: &str) -> Vec<String> {
        let mut out = Findings::default();
        validate_labels(&BTreeMap::from([(key.into(), value.into())]), &mut out);
        out.into_vec().into_iter().map(|f| f.message).collect()
    }

    #[test]
    fn keys_and_values_get_apimachinerys_texts() {
        assert!(label_errors("app", "web").is_empty());
        assert!(label_errors("example.com/Tier", "").is_empty());
        assert_eq!(
            label_errors("bad key!", "v"),
            [format!(
                "Invalid value: \"bad key!\": name part {QUALIFIED_NAME_ERROR}"
            )]
        );
        assert_eq!(
            label_errors("a", &"v".repeat(64)),
            [format!(
                "Invalid value: \"{}\": must be no more than 63 characters",
                "v".repeat(64)
            )]
        );
        assert_eq!(
            label_errors("/a", "v"),
            ["Invalid value: \"/a\": prefix part must be non-empty"]
        );
        assert_eq!(label_errors("a/b/c", "v").len(), 1);
        assert_eq!(
            label_errors("Example.com/a", "v").len(),
            1,
            "a prefix is lowercase"
        );
    }

    #[test]
    fn annotation_keys_ignore_case_and_the_total_is_bounded() {
        let mut out = Findings::default();
        let annotations = BTreeMap::from([
            ("Example.com/Key".to_string(), "v".to_string()),
            ("big".to_string(), "x".repeat(ANNOTATIONS_MAX_BYTES)),
        ]);
        validate_annotations(&annotations, &mut out);
        let texts: Vec<String> = out.into_vec().into_iter().map(|f| f.message).collect();
        assert_eq!(texts, ["Too long: may not be more than 262144 bytes"]);
    }
}
