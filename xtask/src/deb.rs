//! `cargo xtask deb`: the Debian package, in three steps a reader can redo
//! by hand:
//!
//! 1. `cargo build --profile PROFILE --bin wirescope` (release by default);
//! 2. the man pages (gzipped, as Debian wants them) and the shell
//!    completions into `<target>/<PROFILE>/assets/{man,completions}`, from
//!    the real CLI definition ([`crate::dist`]);
//! 3. `cargo deb --no-build --strip`, which packs what `[package.metadata.deb]` in
//!    Cargo.toml lists (the binary, those assets, the systemd unit from
//!    `deploy/systemd/`, the token placeholder from `deploy/debian/`, the
//!    docs) into `<target>/debian/wirescope_<version>-1_<arch>.deb`.
//!
//! Needs `cargo-deb` (`cargo install --locked cargo-deb`) and `gzip`. It
//! never installs anything; `.ci/run` installs and checks the package.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the package with `profile`: `release`, a profile of Cargo.toml, or
/// `dev` (CI: an unoptimized binary, no second build of every crate;
/// cargo-deb warns that it is meant for releases).
pub fn run(profile: &str) -> Result<()> {
    if !crate::cmd::is_installed("cargo-deb") {
        bail!("cargo-deb is not installed: run `cargo install --locked cargo-deb`");
    }
    if profile == "debug" {
        bail!("--profile debug: cargo's profile is called `dev` (its directory is target/debug)");
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = crate::workspace_root();
    let mut build = Command::new(&cargo);
    build.current_dir(root).args([
        "build",
        "--locked",
        "--profile",
        profile,
        "--bin",
        "wirescope",
    ]);
    crate::cmd::run_inherit(&mut build)?;

    let assets = assets_dir(profile);
    write_assets(&assets)?;

    let mut deb = Command::new(&cargo);
    deb.current_dir(root).args([
        "deb",
        "--no-build",
        "--locked",
        "--strip",
        "--profile",
        profile,
    ]);
    crate::cmd::run_inherit(&mut deb)
}

/// Where the generated assets go: `<target>/<profile>/assets`, which
/// `[package.metadata.deb]` names as `target/release/assets` (cargo-deb
/// maps `target/release/` to the real target directory and profile).
fn assets_dir(profile: &str) -> PathBuf {
    let dir = if profile == "dev" { "debug" } else { profile };
    crate::target_dir().join(dir).join("assets")
}

/// Man pages (gzipped) into `assets/man`, completions into `assets/completions`.
fn write_assets(assets: &Path) -> Result<()> {
    // Start clean: a page of a removed subcommand must not be packaged.
    if assets.exists() {
        std::fs::remove_dir_all(assets)
            .with_context(|| format!("removing {}", assets.display()))?;
    }
    let man = assets.join("man");
    let completions = assets.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::dist::completions(&completions)?;
    let pages = crate::dist::man_pages(&man)?;
    // Debian policy 12.1: man pages are compressed with `gzip -9n` (no name
    // or time stamp inside, so the package is reproducible).
    let mut gzip = Command::new("gzip");
    gzip.arg("-9nf").args(&pages);
    crate::cmd::run(&mut gzip)?;
    println!(
        "{} man pages in {}, completions in {}",
        pages.len(),
        man.display(),
        completions.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The assets the package lists exist after `write_assets`: one gzipped
    /// page per visible command (the agent's among them), the three
    /// completions; a page left from an earlier run is removed.
    #[test]
    fn assets_hold_gzipped_man_pages_and_the_completions() {
        let dir = std::env::temp_dir().join(format!("wst-deb-assets-{}", std::process::id()));
        let stale = dir.join("man").join("wirescope-gone.1.gz");
        std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
        std::fs::write(&stale, b"old").unwrap();
        let result = write_assets(&dir);
        let listing = |sub: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir.join(sub))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let (man, completions) = (listing("man"), listing("completions"));
        let gz_ok = man.iter().all(|page| {
            Command::new("gzip")
                .arg("-t")
                .arg(dir.join("man").join(page))
                .status()
                .is_ok_and(|s| s.success())
        });
        std::fs::remove_dir_all(&dir).unwrap();
        result.unwrap();
        assert!(man.contains(&"wirescope.1.gz".to_string()), "{man:?}");
        assert!(man.contains(&"wirescope-agent.1.gz".to_string()), "{man:?}");
        assert!(!man.contains(&"wirescope-gone.1.gz".to_string()), "{man:?}");
        assert!(man.iter().all(|p| p.ends_with(".1.gz")), "{man:?}");
        assert!(gz_ok, "every page is a valid gzip file: {man:?}");
        assert_eq!(
            completions,
            ["_wirescope", "wirescope.bash", "wirescope.fish"]
        );
    }
}
