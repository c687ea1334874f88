//! `cargo xtask dist`: shell completions and man pages, generated from
//! `wirescope::cli::Cli` so they always match the binary's own parser.
//!
//! Writes files only under the chosen output directory.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

const BIN: &str = "wirescope";

/// Write completions and man pages into `out`, printing each path.
pub fn run(out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = completions(out)?;
    written.extend(man_pages(out)?);
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}

/// bash, zsh and fish completions (`wirescope.bash`, `_wirescope`, `wirescope.fish`).
pub fn completions(out: &Path) -> Result<Vec<PathBuf>> {
    let mut cmd = wirescope::cli::Cli::command();
    [Shell::Bash, Shell::Zsh, Shell::Fish]
        .into_iter()
        .map(|shell| {
            clap_complete::generate_to(shell, &mut cmd, BIN, out)
                .with_context(|| format!("writing {shell} completions into {}", out.display()))
        })
        .collect()
}

/// `wirescope.1` plus one `wirescope-<sub>.1` per visible subcommand.
pub fn man_pages(out: &Path) -> Result<Vec<PathBuf>> {
    let mut cmd = wirescope::cli::Cli::command().disable_help_subcommand(true);
    // Building fills in display names ("wirescope-run") and propagated versions.
    cmd.build();
    let mut pages = vec![man_page(cmd.clone(), out)?];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages.push(man_page(sub.clone(), out)?);
    }
    Ok(pages)
}

fn man_page(cmd: clap::Command, out: &Path) -> Result<PathBuf> {
    let man = clap_mangen::Man::new(cmd);
    let name = man.get_filename();
    man.generate_to(out)
        .with_context(|| format!("writing man page {name} into {}", out.display()))
}
