//! The `gzip` item of higress-config: takes nothing, defines [`Gzip`] with Higress's defaults
//! (`NewDefaultGzip`: enabled since Higress #2867, 1 KiB minimum, eight text content types).

use super::gojson::go_struct;

go_struct! {
    /// `gzip`: response compression by Envoy's compressor filter.
    pub struct Gzip as "Gzip" {
        /// Turns compression on.
        pub enable: bool => "enable",
        /// Smallest response body (bytes) that is compressed.
        pub min_content_length: i32 => "minContentLength",
        /// Content types that are compressed.
        pub content_type: Vec<String> => "contentType",
        /// Skip responses that carry an ETag.
        pub disable_on_etag_header: bool => "disableOnEtagHeader",
        /// zlib memory level, 1–9.
        pub memory_level: i32 => "memoryLevel",
        /// zlib window bits, 9–15.
        pub window_bits: i32 => "windowBits",
        /// zlib output chunk size.
        pub chunk_size: i32 => "chunkSize",
        /// zlib compression level (`BEST_COMPRESSION`, `BEST_SPEED`, `COMPRESSION_LEVEL_1`…`_9`).
        pub compression_level: String => "compressionLevel",
        /// zlib strategy (`DEFAULT_STRATEGY`, `FILTERED`, `HUFFMAN_ONLY`, `RLE`, `FIXED`).
        pub compression_strategy: String => "compressionStrategy",
    }
}

/// The content types Higress compresses by default.
pub const DEFAULT_CONTENT_TYPES: [&str; 8] = [
    "text/html",
    "text/css",
    "text/plain",
    "text/xml",
    "application/json",
    "application/javascript",
    "application/xhtml+xml",
    "image/svg+xml",
];

impl Default for Gzip {
    /// Higress's `NewDefaultGzip`.
    fn default() -> Self {
        Gzip {
            enable: true,
            min_content_length: 1024,
            content_type: DEFAULT_CONTENT_TYPES
                .iter()
                .map(|t| t.to_string())
                .collect(),
            disable_on_etag_header: true,
            memory_level: 5,
            window_bits: 12,
            chunk_size: 4096,
            compression_level: "BEST_COMPRESSION".into(),
            compression_strategy: "DEFAULT_STRATEGY".into(),
        }
    }
}
