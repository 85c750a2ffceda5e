//! The `global-option` item of higress-config: takes nothing, defines [`Downstream`], [`Upstream`], [`Http2`]
//! with Higress's defaults, and [`GlobalOption`], the item Higress assembles from the four top-level keys
//! `downstream`, `upstream`, `addXRealIpHeader` and `disableXEnvoyHeaders`.

use serde::Serialize;

use super::gojson::go_struct;

go_struct! {
    /// `downstream`: limits on connections from clients to the gateway.
    pub struct Downstream as "Downstream" {
        /// Connection and stream idle timeout, seconds (0 disables it).
        pub idle_timeout: u32 => "idleTimeout",
        /// Largest request header block, KiB.
        pub max_request_headers_kb: u32 => "maxRequestHeadersKb",
        /// Per-connection buffer limit, bytes.
        pub connection_buffer_limits: u32 => "connectionBufferLimits",
        /// HTTP/2 settings.
        pub http2: Option<Http2> => "http2",
        /// Route timeout, seconds (0: no route-timeout patch).
        pub route_timeout: u32 => "routeTimeout",
    }
}

go_struct! {
    /// `upstream`: limits on connections from the gateway to backends.
    pub struct Upstream as "Upstream" {
        /// Connection idle timeout, seconds.
        pub idle_timeout: u32 => "idleTimeout",
        /// Per-connection buffer limit, bytes.
        pub connection_buffer_limits: u32 => "connectionBufferLimits",
    }
}

go_struct! {
    /// `downstream.http2`: HTTP/2 settings of the gateway's connection manager.
    pub struct Http2 as "Http2" {
        /// Concurrent streams per connection.
        pub max_concurrent_streams: u32 => "maxConcurrentStreams",
        /// Initial stream window, bytes.
        pub initial_stream_window_size: u32 => "initialStreamWindowSize",
        /// Initial connection window, bytes.
        pub initial_connection_window_size: u32 => "initialConnectionWindowSize",
    }
}

impl Default for Downstream {
    /// Higress's `NewDefaultDownstream`.
    fn default() -> Self {
        Downstream {
            idle_timeout: 180,
            max_request_headers_kb: 60,
            connection_buffer_limits: 32768,
            http2: Some(Http2::default()),
            route_timeout: 0,
        }
    }
}

impl Default for Upstream {
    /// Higress's `NewDefaultUpStream`.
    fn default() -> Self {
        Upstream {
            idle_timeout: 10,
            connection_buffer_limits: 10_485_760,
        }
    }
}

impl Default for Http2 {
    /// Higress's `NewDefaultHttp2`.
    fn default() -> Self {
        Http2 {
            max_concurrent_streams: 100,
            initial_stream_window_size: 65535,
            initial_connection_window_size: 1_048_576,
        }
    }
}

/// The global-option item: the four top-level keys Higress's `Global` struct gathers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GlobalOption {
    /// `downstream` (`None` after an explicit `null`).
    pub downstream: Option<Downstream>,
    /// `upstream` (`None` after an explicit `null`).
    pub upstream: Option<Upstream>,
    /// `addXRealIpHeader`.
    pub add_x_real_ip_header: bool,
    /// `disableXEnvoyHeaders`.
    pub disable_x_envoy_headers: bool,
}

impl Default for GlobalOption {
    /// Higress's `NewDefaultGlobalOption`.
    fn default() -> Self {
        GlobalOption {
            downstream: Some(Downstream::default()),
            upstream: Some(Upstream::default()),
            add_x_real_ip_header: false,
            disable_x_envoy_headers: false,
        }
    }
}

/// The global option as Higress's item controller stores it after an update (`deepCopyGlobal`, or the defaults
/// after a Delete): every value copied onto the defaults, so a missing `downstream`, `upstream` or
/// `downstream.http2` is replaced by its defaults and the HTTP/2 settings are always present.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveGlobal {
    /// Downstream settings.
    pub downstream: Downstream,
    /// HTTP/2 settings (always set: Higress copies onto a default `Http2` and never clears it).
    pub http2: Http2,
    /// Upstream settings.
    pub upstream: Upstream,
    /// `addXRealIpHeader`.
    pub add_x_real_ip_header: bool,
    /// `disableXEnvoyHeaders`.
    pub disable_x_envoy_headers: bool,
}

impl GlobalOption {
    /// Returns the stored form Higress builds its EnvoyFilter from.
    pub fn effective(&self) -> EffectiveGlobal {
        let downstream = self.downstream.clone().unwrap_or_default();
        let http2 = downstream.http2.clone().unwrap_or_default();
        EffectiveGlobal {
            downstream,
            http2,
            upstream: self.upstream.clone().unwrap_or_default(),
            add_x_real_ip_header: self.add_x_real_ip_header,
            disable_x_envoy_headers: self.disable_x_envoy_headers,
        }
    }
}
