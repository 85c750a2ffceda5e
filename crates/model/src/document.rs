//! Document parsing (pure): takes the text of a YAML or JSON file and yields its documents as JSON values,
//! one per YAML document, with `kind: List` expanded into its items.

use serde::Deserialize;
use serde_json::Value;

/// One document found in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it sits in the file: `"3"` for the third YAML document, `"3.items[0]"` for an item of a List.
    pub position: String,
    /// The document, or why it could not be parsed.
    pub value: Result<Value, Error>,
}

/// Why a document could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The parser's message, with line and column when known.
    pub message: String,
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Most YAML documents read from one file; the rest of a file with more is refused with an error document.
pub const MAX_DOCUMENTS_PER_FILE: usize = 10_000;

/// Splits `text` into documents. Empty documents (only comments or `---`) are skipped. A syntax error ends the
/// file: it is returned as the last document, since nothing after it can be trusted; so does a document past
/// [`MAX_DOCUMENTS_PER_FILE`]. Nesting deeper than 128 levels is a syntax error (the parsers' recursion limit).
pub fn parse_documents(text: &str) -> Vec<Document> {
    let mut documents = Vec::new();
    for (index, yaml) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let position = (index + 1).to_string();
        if index == MAX_DOCUMENTS_PER_FILE {
            documents.push(Document {
                position,
                value: Err(Error {
                    message: format!(
                        "more than {MAX_DOCUMENTS_PER_FILE} YAML documents in one file; split it"
                    ),
                }),
            });
            break;
        }
        match Value::deserialize(yaml) {
            Ok(Value::Null) => {}
            Ok(value) => expand_list(position, value, &mut documents),
            Err(error) => {
                documents.push(Document {
                    position,
                    value: Err(Error {
                        message: error.to_string(),
                    }),
                });
                break;
            }
        }
    }
    documents
}

/// Pushes `value`, or each item of it when it is a `kind: List` (`v1` List or any `*List` kind with `items`).
fn expand_list(position: String, value: Value, out: &mut Vec<Document>) {
    let is_list = value["kind"]
        .as_str()
        .is_some_and(|kind| kind == "List" || kind.ends_with("List"))
        && value["items"].is_array();
    if !is_list {
        out.push(Document {
            position,
            value: Ok(value),
        });
        return;
    }
    if let Value::Object(mut fields) = value {
        if let Some(Value::Array(items)) = fields.remove("items") {
            for (i, item) in items.into_iter().enumerate() {
                out.push(Document {
                    position: format!("{position}.items[{i}]"),
                    value: Ok(item),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_count_and_nesting_are_bounded() {
        let many = "a: 1\n---\n".repeat(MAX_DOCUMENTS_PER_FILE + 5);
        let docs = parse_documents(&many);
        assert_eq!(docs.len(), MAX_DOCUMENTS_PER_FILE + 1);
        let last = docs.last().unwrap().value.as_ref().unwrap_err();
        assert!(last.message.contains("more than 10000"), "{last}");
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let docs = parse_documents(&deep);
        let error = docs[0].value.as_ref().unwrap_err();
        assert!(error.message.contains("recursion limit"), "{error}");
        let json = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(
            serde_json::from_str::<Value>(&json).is_err(),
            "serde_json stops at 128 levels"
        );
    }

    #[test]
    fn splits_multi_document_yaml_and_skips_empty_ones() {
        let docs = parse_documents("a: 1\n---\n# only a comment\n---\nb: 2\n");
        let positions: Vec<_> = docs.iter().map(|d| d.position.as_str()).collect();
        assert_eq!(positions, ["1", "3"]);
        assert_eq!(docs[1].value, Ok(serde_json::json!({"b": 2})));
    }

    #[test]
    fn expands_lists() {
        let docs = parse_documents("kind: List\nitems:\n- kind: A\n- kind: B\n");
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].position, "1.items[1]");
    }

    #[test]
    fn parses_json_too() {
        let docs = parse_documents(r#"{"kind": "X", "n": [1, 2]}"#);
        assert_eq!(
            docs[0].value,
            Ok(serde_json::json!({"kind": "X", "n": [1, 2]}))
        );
    }

    #[test]
    fn a_syntax_error_ends_the_file() {
        let docs = parse_documents("a: 1\n---\na: [\n---\nb: 2\n");
        assert_eq!(docs.len(), 2);
        assert!(docs[1].value.is_err());
    }
}
