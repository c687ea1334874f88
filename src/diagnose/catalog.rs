//! The driver/firmware catalog, embedded from `assets/catalog.toml`.
//!
//! Pure: the text is compiled in with `include_str!` and parsed once. A value
//! the catalog does not list is "not in catalog", never "outdated".

use super::finding::Severity;
use super::util::version_numbers;
use serde::Deserialize;
use std::sync::OnceLock;

/// The embedded TOML text.
pub const CATALOG_TOML: &str = include_str!("../../assets/catalog.toml");

/// The whole catalog.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct Catalog {
    /// Date of the last review (YYYY-MM-DD).
    pub updated: String,
    /// mlx5_core driver data.
    pub mlx5: Mlx5,
    /// ConnectX firmware floors, one per major.
    #[serde(default)]
    pub firmware: Vec<FirmwareFloor>,
}

/// mlx5_core driver data.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct Mlx5 {
    /// Oldest acceptable MLNX_OFED / DOCA-OFED version (`major.minor`).
    pub ofed_min: String,
    /// Where that floor comes from.
    pub ofed_source: String,
    /// Inbox versions known to be outdated.
    #[serde(default)]
    pub inbox_outdated: Vec<InboxVersion>,
}

/// An inbox mlx5_core version string known to be outdated.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InboxVersion {
    /// Exactly as `ethtool -i` prints it.
    pub version: String,
    /// How bad.
    pub severity: Severity,
    /// What it is.
    pub note: String,
    /// Where that comes from.
    pub source: String,
}

/// The firmware floor of one ConnectX generation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FirmwareFloor {
    /// First number of the firmware version (12 = ConnectX-4, 16 = ConnectX-5...).
    pub major: u64,
    /// Device family.
    pub device: String,
    /// Oldest acceptable version.
    pub floor: String,
    /// Where that comes from.
    pub source: String,
}

/// A catalog text that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("assets/catalog.toml: {0}")]
pub struct CatalogError(#[source] pub toml::de::Error);

/// Parse a catalog text.
pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
    toml::from_str(text).map_err(CatalogError)
}

/// The embedded catalog; an empty one (everything "not in catalog") if it does not parse,
/// which the unit tests rule out.
pub fn catalog() -> &'static Catalog {
    static CAT: OnceLock<Catalog> = OnceLock::new();
    CAT.get_or_init(|| parse(CATALOG_TOML).unwrap_or_default())
}

/// How an mlx5_core version string classifies.
#[derive(Debug, Clone, PartialEq)]
pub enum Mlx5Version<'a> {
    /// An inbox version the catalog lists as outdated.
    InboxOutdated(&'a InboxVersion),
    /// The inbox driver of a kernel (version = kernel release), not judged.
    InboxKernel,
    /// MLNX_OFED / DOCA-OFED `major.minor-...`; `outdated` against `ofed_min`.
    Ofed {
        /// Below the catalog's floor.
        outdated: bool,
    },
    /// Anything else.
    Unknown,
}

impl Catalog {
    /// Classify an mlx5_core driver version.
    pub fn mlx5_version(&self, version: &str) -> Mlx5Version<'_> {
        let v = version.trim();
        if let Some(i) = self.mlx5.inbox_outdated.iter().find(|i| i.version == v) {
            return Mlx5Version::InboxOutdated(i);
        }
        let head = v.split('-').next().unwrap_or("");
        let dots = head.matches('.').count();
        let numeric_head = !head.is_empty() && head.split('.').all(|p| p.parse::<u64>().is_ok());
        if !numeric_head {
            return Mlx5Version::Unknown;
        }
        if dots >= 2 {
            return Mlx5Version::InboxKernel;
        }
        // OFED: "4.3-1.0.1": a release part with dots after the dash.
        let tail = v.split_once('-').map(|(_, t)| t).unwrap_or("");
        if dots == 1 && tail.split_whitespace().count() == 1 && tail.contains('.') {
            let have = version_numbers(v);
            let min = version_numbers(&self.mlx5.ofed_min);
            let outdated = have.len() >= 2 && min.len() >= 2 && have[..2] < min[..2];
            return Mlx5Version::Ofed { outdated };
        }
        Mlx5Version::Unknown
    }

    /// The floor of a firmware major, if catalogued.
    pub fn firmware_floor(&self, major: u64) -> Option<&FirmwareFloor> {
        self.firmware.iter().find(|f| f.major == major)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_parses() {
        let c = parse(CATALOG_TOML).expect("catalog parses");
        assert!(!c.updated.is_empty());
        for major in [12, 14, 16, 20, 22, 26, 28, 40] {
            let f = c.firmware_floor(major).expect("major listed");
            assert_eq!(version_numbers(&f.floor)[0], major);
            assert!(!f.source.is_empty());
        }
        assert_eq!(catalog(), &c);
    }

    #[test]
    fn mlx5_versions() {
        let c = catalog();
        assert!(matches!(
            c.mlx5_version("3.0-1 (January 2015)"),
            Mlx5Version::InboxOutdated(_)
        ));
        assert!(matches!(
            c.mlx5_version("5.0-0"),
            Mlx5Version::InboxOutdated(_)
        ));
        assert_eq!(
            c.mlx5_version("4.3-1.0.1"),
            Mlx5Version::Ofed { outdated: false }
        );
        assert_eq!(
            c.mlx5_version("3.4-2.0.0"),
            Mlx5Version::Ofed { outdated: true }
        );
        assert_eq!(
            c.mlx5_version("24.07-0.6.1"),
            Mlx5Version::Ofed { outdated: false }
        );
        assert_eq!(c.mlx5_version("6.8.0-45-generic"), Mlx5Version::InboxKernel);
        assert_eq!(c.mlx5_version("weird"), Mlx5Version::Unknown);
        assert_eq!(c.mlx5_version("2.2-1 (Feb 2014)"), Mlx5Version::Unknown);
    }
}
