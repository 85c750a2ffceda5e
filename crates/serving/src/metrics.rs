//! Metric registration (pure): takes a component's metrics with their names and help texts, registers them into the
//! shared registry the admin server exports. Every component registers through [`register_metrics`], one line a metric.

/// Registers metrics into a `&mut Registry` (prefixes come from the registry, e.g. a `sub_registry_with_prefix`):
/// `register_metrics! { registry; "name" => metric, "help"; ... }`, each `metric` an expression of a cloneable
/// metric handle (it is cloned, the caller keeps its handle).
#[macro_export]
macro_rules! register_metrics {
    ($registry:expr; $($name:literal => $metric:expr, $help:expr;)+) => {{
        let registry: &mut prometheus_client::registry::Registry = $registry;
        $(registry.register($name, $help, ::core::clone::Clone::clone(&$metric));)+
    }};
}

pub use crate::register_metrics;
