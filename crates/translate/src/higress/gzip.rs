//! gzip → `higress-config-gzip`: takes the stored [`Gzip`] item, yields (when enabled) an EnvoyFilter that
//! inserts Envoy's compressor filter with the gzip library before the CORS filter.

use serde_json::{json, Value};

use super::{document, http_filter, patch, CORS};
use admitpilot_model::higress_config::Gzip;

/// Name of the EnvoyFilter.
const NAME: &str = "higress-config-gzip";

/// Builds the gzip EnvoyFilter, or `None` when gzip is off.
///
/// Deviation: the zlib chunk size goes into Envoy's real field `chunk_size`. Higress writes `check_size`,
/// which the gzip compressor proto does not have, so Istio's lenient conversion drops it and `chunkSize`
/// never takes effect there (Envoy keeps its default 4096).
pub(super) fn envoy_filter(g: &Gzip, namespace: &str) -> Option<Value> {
    if !g.enable {
        return None;
    }
    let compressor = json!({
        "name": "envoy.filters.http.compressor",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor",
            "response_direction_config": {
                "common_config": {
                    "min_content_length": g.min_content_length,
                    "content_type": g.content_type,
                },
                "disable_on_etag_header": g.disable_on_etag_header,
            },
            "request_direction_config": {
                "common_config": {
                    "enabled": {"default_value": false, "runtime_key": "request_compressor_enabled"},
                },
            },
            "compressor_library": {
                "name": "text_optimized",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip",
                    "memory_level": g.memory_level,
                    "window_bits": g.window_bits,
                    "chunk_size": g.chunk_size,
                    "compression_level": g.compression_level,
                    "compression_strategy": g.compression_strategy,
                },
            },
        },
    });
    Some(document(
        NAME,
        namespace,
        vec![patch(
            "HTTP_FILTER",
            Some(http_filter(CORS)),
            "INSERT_BEFORE",
            compressor,
        )],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_gzip_has_no_filter() {
        let g = Gzip {
            enable: false,
            ..Gzip::default()
        };
        assert_eq!(envoy_filter(&g, "ns"), None);
    }

    #[test]
    fn chunk_size_uses_envoys_field() {
        let g = Gzip {
            chunk_size: 8192,
            ..Gzip::default()
        };
        let filter = envoy_filter(&g, "ns").unwrap();
        let library = &filter["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]
            ["compressor_library"]["typed_config"];
        assert_eq!(library["chunk_size"], 8192);
        assert!(library.get("check_size").is_none());
    }
}
