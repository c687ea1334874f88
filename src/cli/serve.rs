//! `wirescope serve ...`: the command's arguments. Which servers it offers,
//! and each one's own arguments, are the engines' (`traffic::registry::ServeWhat`);
//! the command runs in `face::serve`.

use crate::traffic::registry::ServeWhat;
use clap::Args;

/// `wirescope serve ...`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// What to serve.
    #[command(subcommand)]
    pub what: ServeWhat,
}
