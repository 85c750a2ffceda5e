//! Item-by-item comparison of two higress-configs: takes the old and new [`HigressConfig`] and yields an
//! [`ItemChanges`] with Higress's per-item result (Nothing / Replace / Delete).
//!
//! Higress first compares the whole config (`CompareHigressConfig`: equal → nothing happens at all), then asks
//! every item controller: both absent → Nothing, new absent → Delete (reset to defaults), different → Replace,
//! equal → Nothing. The global-option item is also a Delete when `downstream` and `upstream` are absent and
//! both flags are false. Go's `DeepEqual` tells a nil list from an empty one; these configs do not keep that
//! difference, so an edit that only swaps `[]` for `null` in a list is Nothing here.

use serde::Serialize;

use super::{GlobalOption, Gzip, HigressConfig, Item, McpServer, Tracing};

/// What an update does to one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// Unchanged: no push for this item.
    Nothing,
    /// New value stored and pushed.
    Replace,
    /// Item reset to its defaults and pushed.
    Delete,
}

/// The change of every item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemChanges {
    /// tracing.
    pub tracing: Change,
    /// gzip.
    pub gzip: Change,
    /// global-option.
    pub global_option: Change,
    /// mcpServer.
    pub mcp_server: Change,
}

impl ItemChanges {
    /// No item changes.
    pub const NOTHING: ItemChanges = ItemChanges {
        tracing: Change::Nothing,
        gzip: Change::Nothing,
        global_option: Change::Nothing,
        mcp_server: Change::Nothing,
    };

    /// The change of one item.
    pub fn get(&self, item: Item) -> Change {
        match item {
            Item::Tracing => self.tracing,
            Item::Gzip => self.gzip,
            Item::GlobalOption => self.global_option,
            Item::McpServer => self.mcp_server,
        }
    }

    /// The items that changed (Replace or Delete), in Higress's order.
    pub fn changed(&self) -> Vec<Item> {
        Item::ALL
            .into_iter()
            .filter(|item| self.get(*item) != Change::Nothing)
            .collect()
    }

    /// The EnvoyFilter names a push must report as updated.
    pub fn changed_envoy_filters(&self) -> Vec<&'static str> {
        self.changed()
            .into_iter()
            .flat_map(|item| item.envoy_filter_names().iter().copied())
            .collect()
    }
}

/// Compares two configs as Higress does on a ConfigMap update.
pub fn diff(old: &HigressConfig, new: &HigressConfig) -> ItemChanges {
    if old == new {
        return ItemChanges::NOTHING;
    }
    ItemChanges {
        tracing: compare_tracing(old.tracing.as_ref(), new.tracing.as_ref()),
        gzip: compare_gzip(old.gzip.as_ref(), new.gzip.as_ref()),
        global_option: compare_global(Some(&old.global_option()), Some(&new.global_option())),
        mcp_server: compare_mcp_server(old.mcp_server.as_ref(), new.mcp_server.as_ref()),
    }
}

/// Higress's rule shared by `compareTracing`, `compareGzip` and `compareMcpServer`.
fn compare_item<T: PartialEq>(old: Option<&T>, new: Option<&T>) -> Change {
    match (old, new) {
        (None, None) => Change::Nothing,
        (_, None) => Change::Delete,
        (old, Some(new)) if old != Some(new) => Change::Replace,
        _ => Change::Nothing,
    }
}

/// Higress's `compareTracing`.
pub fn compare_tracing(old: Option<&Tracing>, new: Option<&Tracing>) -> Change {
    compare_item(old, new)
}

/// Higress's `compareGzip`.
pub fn compare_gzip(old: Option<&Gzip>, new: Option<&Gzip>) -> Change {
    compare_item(old, new)
}

/// Higress's `compareMcpServer`.
pub fn compare_mcp_server(old: Option<&McpServer>, new: Option<&McpServer>) -> Change {
    compare_item(old, new)
}

/// Higress's `compareGlobal`: the shared rule plus Delete when nothing of the item is set.
pub fn compare_global(old: Option<&GlobalOption>, new: Option<&GlobalOption>) -> Change {
    if let Some(new) = new {
        if new.downstream.is_none()
            && new.upstream.is_none()
            && !new.add_x_real_ip_header
            && !new.disable_x_envoy_headers
        {
            return Change::Delete;
        }
    }
    compare_item(old, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::higress_config::{Downstream, Http2, Upstream};

    fn gzip_baseline() -> Gzip {
        Gzip {
            enable: false,
            ..Gzip::default()
        }
    }

    #[test]
    fn gzip_compare_table() {
        let base = gzip_baseline();
        assert_eq!(compare_gzip(None, None), Change::Nothing);
        assert_eq!(compare_gzip(Some(&base), None), Change::Delete);
        assert_eq!(
            compare_gzip(Some(&base), Some(&base.clone())),
            Change::Nothing
        );
        let enabled = Gzip {
            enable: true,
            ..base.clone()
        };
        assert_eq!(compare_gzip(Some(&base), Some(&enabled)), Change::Replace);
        assert_eq!(compare_gzip(None, Some(&enabled)), Change::Replace);
    }

    #[test]
    fn global_compare_table() {
        let default = GlobalOption::default();
        assert_eq!(compare_global(None, None), Change::Nothing);
        assert_eq!(compare_global(Some(&default), None), Change::Delete);
        let empty = GlobalOption {
            downstream: None,
            upstream: None,
            add_x_real_ip_header: false,
            disable_x_envoy_headers: false,
        };
        assert_eq!(compare_global(Some(&default), Some(&empty)), Change::Delete);
        assert_eq!(
            compare_global(Some(&default), Some(&default.clone())),
            Change::Nothing
        );
        let changed = GlobalOption {
            downstream: Some(Downstream {
                idle_timeout: 1,
                ..Downstream::default()
            }),
            upstream: None,
            add_x_real_ip_header: true,
            disable_x_envoy_headers: true,
        };
        assert_eq!(
            compare_global(Some(&default), Some(&changed)),
            Change::Replace
        );
    }

    #[test]
    fn tracing_compare_table() {
        let default = Tracing::default();
        assert_eq!(compare_tracing(None, None), Change::Nothing);
        assert_eq!(compare_tracing(Some(&default), None), Change::Delete);
        assert_eq!(
            compare_tracing(Some(&default), Some(&default.clone())),
            Change::Nothing
        );
        let slower = Tracing {
            timeout: 900,
            ..default.clone()
        };
        assert_eq!(
            compare_tracing(Some(&default), Some(&slower)),
            Change::Replace
        );
        // DeepEqual on float64: 100 and 100.0 are the same value.
        let same = Tracing {
            sampling: 100.0,
            ..default.clone()
        };
        assert_eq!(
            compare_tracing(Some(&default), Some(&same)),
            Change::Nothing
        );
    }

    #[test]
    fn mcp_compare_table() {
        let default = McpServer::default();
        assert_eq!(compare_mcp_server(None, None), Change::Nothing);
        assert_eq!(compare_mcp_server(Some(&default), None), Change::Delete);
        assert_eq!(
            compare_mcp_server(Some(&default), Some(&default.clone())),
            Change::Nothing
        );
        let mut changed = default.clone();
        changed.redis = Some(crate::higress_config::RedisConfig {
            address: "redis:6379".into(),
            ..Default::default()
        });
        changed.match_list.push(crate::higress_config::MatchRule {
            match_rule_type: "prefix".into(),
            ..Default::default()
        });
        assert_eq!(
            compare_mcp_server(Some(&default), Some(&changed)),
            Change::Replace
        );
    }

    #[test]
    fn equal_configs_change_nothing_even_with_an_empty_global() {
        let mut config = HigressConfig {
            downstream: None,
            upstream: None,
            ..HigressConfig::default()
        };
        assert_eq!(diff(&config, &config.clone()), ItemChanges::NOTHING);
        // Once something else differs, Higress's compareGlobal reports the empty global as a Delete again.
        let old = config.clone();
        config.gzip = None;
        let changes = diff(&old, &config);
        assert_eq!(changes.gzip, Change::Delete);
        assert_eq!(changes.global_option, Change::Delete);
        assert_eq!(changes.tracing, Change::Nothing);
        assert_eq!(
            changes.changed_envoy_filters(),
            ["higress-config-gzip", "global-option"]
        );
    }

    #[test]
    fn diff_reports_each_item() {
        let old = HigressConfig::default();
        let mut new = old.clone();
        new.tracing = None;
        new.upstream = Some(Upstream {
            idle_timeout: 0,
            ..Upstream::default()
        });
        new.downstream.as_mut().unwrap().http2 = Some(Http2 {
            max_concurrent_streams: 200,
            ..Http2::default()
        });
        let changes = diff(&old, &new);
        assert_eq!(changes.tracing, Change::Delete);
        assert_eq!(changes.global_option, Change::Replace);
        assert_eq!(changes.gzip, Change::Nothing);
        assert_eq!(changes.mcp_server, Change::Nothing);
        assert_eq!(changes.changed(), [Item::Tracing, Item::GlobalOption]);
    }

    /// Higress's `TestGzipController_AddOrUpdateHigressConfig`, `Test_AddOrUpdateHigressConfig` (global) and
    /// the MCP controller cases, as whole-config diffs: push or not, and which result.
    #[test]
    fn controller_tables() {
        let default = HigressConfig::default();
        assert_eq!(diff(&default, &default.clone()), ItemChanges::NOTHING);

        let with_gzip = |enable: bool, min: i32| HigressConfig {
            gzip: Some(Gzip {
                enable,
                min_content_length: min,
                ..Gzip::default()
            }),
            ..HigressConfig::default()
        };
        assert_eq!(diff(&default, &with_gzip(true, 2048)).gzip, Change::Replace);
        assert_eq!(
            diff(&with_gzip(true, 1024), &with_gzip(false, 2048)).gzip,
            Change::Replace
        );
        let no_gzip = HigressConfig {
            gzip: None,
            ..HigressConfig::default()
        };
        assert_eq!(diff(&with_gzip(true, 1024), &no_gzip).gzip, Change::Delete);

        let global = HigressConfig {
            downstream: Some(Downstream {
                idle_timeout: 1,
                ..Downstream::default()
            }),
            upstream: Some(Upstream {
                idle_timeout: 10,
                connection_buffer_limits: 0,
            }),
            add_x_real_ip_header: true,
            disable_x_envoy_headers: true,
            ..HigressConfig::default()
        };
        assert_eq!(diff(&default, &global).global_option, Change::Replace);
        let everything_unset = HigressConfig {
            tracing: None,
            gzip: None,
            downstream: None,
            upstream: None,
            disable_x_envoy_headers: false,
            add_x_real_ip_header: false,
            mcp_server: None,
            mesh: Default::default(),
        };
        let changes = diff(&default, &everything_unset);
        assert_eq!(changes.global_option, Change::Delete);
        assert_eq!(changes.changed(), Item::ALL);

        let mcp_on = HigressConfig {
            mcp_server: Some(McpServer {
                enable: true,
                redis: Some(crate::higress_config::RedisConfig {
                    address: "localhost:6379".into(),
                    ..Default::default()
                }),
                ..McpServer::default()
            }),
            ..HigressConfig::default()
        };
        assert_eq!(diff(&default, &mcp_on).mcp_server, Change::Replace);
        let mut moved = mcp_on.clone();
        moved
            .mcp_server
            .as_mut()
            .unwrap()
            .redis
            .as_mut()
            .unwrap()
            .address = "redis:6379".into();
        assert_eq!(diff(&mcp_on, &moved).mcp_server, Change::Replace);
        assert_eq!(diff(&mcp_on, &everything_unset).mcp_server, Change::Delete);
    }
}
