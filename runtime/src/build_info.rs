//! `<prefix>_build_info{version} 1` on every binary's /metrics: which
//! netaware version serves them, for a dashboard to show and an alert to
//! tell a fleet mid-upgrade from one stuck on two versions.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The version every netaware binary of this build reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// Registers `build_info` (under the registry's prefix), always 1, with
/// the version as its label.
pub fn register_build_info(registry: &mut Registry) {
    let family = Family::<BuildLabels, Gauge>::default();
    family
        .get_or_create(&BuildLabels { version: VERSION })
        .set(1);
    registry.register(
        "build_info",
        "The netaware version serving these metrics (always 1)",
        family,
    );
}
