//! The `tracing` item of higress-config: takes nothing, defines [`Tracing`] and its tracers with Higress's
//! defaults (`NewDefaultTracing`: disabled, timeout 500 ms, sampling 100 %).

use super::gojson::go_struct;

go_struct! {
    /// `tracing`: Envoy tracing for every gateway HTTP connection manager.
    pub struct Tracing as "Tracing" {
        /// Turns tracing on.
        pub enable: bool => "enable",
        /// Percentage (0–100) of requests sampled.
        pub sampling: f64 => "sampling",
        /// gRPC timeout of the tracer, in milliseconds.
        pub timeout: i32 => "timeout",
        /// Zipkin tracer.
        pub zipkin: Option<Zipkin> => "zipkin",
        /// SkyWalking tracer.
        pub skywalking: Option<Skywalking> => "skywalking",
        /// OpenTelemetry tracer.
        pub opentelemetry: Option<OpenTelemetry> => "opentelemetry",
    }
}

go_struct! {
    /// A Zipkin collector.
    #[derive(Default)]
    pub struct Zipkin as "Zipkin" {
        /// Collector service host (a cluster `outbound|port||service` must exist).
        pub service: String => "service",
        /// Collector port, as text.
        pub port: String => "port",
    }
}

go_struct! {
    /// A SkyWalking OAP collector.
    #[derive(Default)]
    pub struct Skywalking as "Skywalking" {
        /// Collector service host.
        pub service: String => "service",
        /// Collector port, as text.
        pub port: String => "port",
        /// Backend token sent to the collector.
        pub access_token: String => "access_token",
    }
}

go_struct! {
    /// An OpenTelemetry collector (OTLP/gRPC).
    #[derive(Default)]
    pub struct OpenTelemetry as "OpenTelemetry" {
        /// Collector service host.
        pub service: String => "service",
        /// Collector port, as text.
        pub port: String => "port",
    }
}

impl Default for Tracing {
    /// Higress's `NewDefaultTracing`.
    fn default() -> Self {
        Tracing {
            enable: false,
            sampling: 100.0,
            timeout: 500,
            zipkin: None,
            skywalking: None,
            opentelemetry: None,
        }
    }
}
