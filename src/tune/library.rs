//! Where profiles come from: the ones shipped in the binary (`profiles/`),
//! the ones saved in the state directory, and files given by path.
//!
//! A name is looked up as a path first (anything with a `/` or ending in
//! `.toml`), then among saved profiles, then among shipped ones, so a saved
//! profile can shadow a shipped one of the same name.

use super::error::TuneError;
use super::profile::{check_profile_name, Profile};
use super::state::StateDir;
use std::path::{Path, PathBuf};

/// The profiles shipped with wirescope: (name, text).
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "throughput-100g",
        include_str!("../../profiles/throughput-100g.toml"),
    ),
    (
        "low-latency",
        include_str!("../../profiles/low-latency.toml"),
    ),
    ("many-flows", include_str!("../../profiles/many-flows.toml")),
    ("defaults", include_str!("../../profiles/defaults.toml")),
];

/// Where a profile was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Built into the binary.
    Shipped,
    /// A file (saved, or given by path).
    File(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Shipped => f.write_str("shipped"),
            Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A profile and its text.
#[derive(Debug, Clone)]
pub struct Found {
    /// Parsed.
    pub profile: Profile,
    /// As written.
    pub text: String,
    /// Where from.
    pub origin: Origin,
}

/// Read and parse a profile file.
pub fn load_file(path: &Path) -> Result<Found, TuneError> {
    use crate::probe::trusted::{read_bounded, BoundedError};
    // Bounded and regular files only: `/dev/zero` or a FIFO would never end.
    let text = read_bounded(path, super::profile::MAX_TEXT as u64).map_err(|e| TuneError::Io {
        op: "read",
        path: path.display().to_string(),
        source: match e {
            BoundedError::Io { source, .. } => source,
            BoundedError::TooLarge { .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "larger than 256 KiB: not a profile",
            ),
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
        },
    })?;
    let profile = Profile::parse(&text, &path.display().to_string())?;
    Ok(Found {
        profile,
        text,
        origin: Origin::File(path.to_path_buf()),
    })
}

/// A shipped profile by name.
pub fn shipped(name: &str) -> Option<Result<Found, TuneError>> {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(n, text)| {
        let profile = Profile::parse(text, &format!("profiles/{n}.toml (shipped)"))?;
        Ok(Found {
            profile,
            text: (*text).to_string(),
            origin: Origin::Shipped,
        })
    })
}

/// The file a saved profile of this name lives in.
pub fn saved_path(state: &StateDir, name: &str) -> PathBuf {
    state.profiles_dir().join(format!("{name}.toml"))
}

/// Find a profile by path or name (see the module docs).
pub fn find(arg: &str, state: &StateDir) -> Result<Found, TuneError> {
    if arg.contains('/') || arg.ends_with(".toml") {
        return load_file(Path::new(arg));
    }
    if check_profile_name(arg).is_ok() {
        let saved = saved_path(state, arg);
        if saved.is_file() {
            return load_file(&saved);
        }
        if let Some(f) = shipped(arg) {
            return f;
        }
    }
    Err(TuneError::NotFound {
        name: arg.to_string(),
        hint: format!(
            "not a file, not saved in {}, not shipped ({}); see `wirescope profile list`",
            state.profiles_dir().display(),
            SHIPPED
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// One line of `profile list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Listed {
    /// Name.
    pub name: String,
    /// What it is for.
    pub purpose: String,
    /// Description.
    pub description: String,
    /// Where it is (`shipped` or a path).
    pub origin: String,
    /// Why it does not load, if it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Saved profiles, then shipped ones.
pub fn list(state: &StateDir) -> Vec<Listed> {
    let listed = |found: Result<Found, TuneError>, name: String, origin: String| match found {
        Ok(f) => Listed {
            name: f.profile.name,
            purpose: f.profile.purpose,
            description: f.profile.description,
            origin: f.origin.to_string(),
            error: None,
        },
        Err(e) => Listed {
            name,
            purpose: String::new(),
            description: String::new(),
            origin,
            error: Some(e.to_string()),
        },
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(state.profiles_dir())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out: Vec<Listed> = files
        .into_iter()
        .map(|p| {
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            listed(load_file(&p), name, p.display().to_string())
        })
        .collect();
    for (name, _) in SHIPPED {
        if let Some(found) = shipped(name) {
            out.push(listed(found, name.to_string(), "shipped".into()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_profile_parses_and_is_named_after_its_file() {
        for (name, _) in SHIPPED {
            let f = shipped(name)
                .unwrap()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(f.profile.name, *name);
            assert!(
                !f.profile.description.is_empty() && !f.profile.purpose.is_empty(),
                "{name}"
            );
        }
    }

    #[test]
    fn saved_profiles_shadow_shipped_ones() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::at(d.path());
        assert_eq!(find("defaults", &s).unwrap().origin, Origin::Shipped);
        std::fs::create_dir_all(s.profiles_dir()).unwrap();
        std::fs::write(saved_path(&s, "defaults"), "name = \"defaults\"\n").unwrap();
        assert!(matches!(
            find("defaults", &s).unwrap().origin,
            Origin::File(_)
        ));
        let e = find("nope", &s).unwrap_err().to_string();
        assert!(e.contains("profile list"), "{e}");
    }
}
