//! Checklist test steps checked with the real `wirescope run` parser: the
//! tuning module (below the command line) cannot parse arguments itself.

use super::UsageError;
use crate::tune::checklist::TestStep;
use crate::tune::decide::Metric;

/// Check a checklist's test with the real `wirescope run` parser (hand it
/// to [`Checklist::check_run`](crate::tune::checklist::Checklist::check_run)).
pub fn check_run_args(step: &TestStep) -> Result<(), UsageError> {
    let mut argv = vec!["wirescope".to_string(), "run".to_string()];
    argv.extend(step.run.iter().cloned());
    let cli = <super::Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| UsageError(e.to_string().trim().to_string()))?;
    let Some(super::Command::Run(r)) = cli.command else {
        return Err(UsageError("not a `wirescope run` command line".into()));
    };
    let plan = r.test.resolve()?;
    if plan.sweep.is_some() {
        return Err(UsageError(
            "--sweep makes several points; a checklist compares one".into(),
        ));
    }
    let stream = plan.spec.bulk_transfer();
    match step.metric {
        Metric::Throughput => Ok(()),
        Metric::Rate | Metric::P99 if stream => Err(UsageError(
            "metric rate/p99 needs --mode rr or pingpong".into(),
        )),
        _ => Ok(()),
    }
}

/// `wirescope checklist`.
#[derive(Debug, clap::Args)]
pub struct ChecklistArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ChecklistCommand,
}

/// `checklist list | run`.
#[derive(Debug, clap::Subcommand)]
pub enum ChecklistCommand {
    /// The shipped checklists.
    List,
    /// Walk through a checklist: a baseline test, then each proposed change
    /// (confirmed, backed up, re-measured, kept or rolled back).
    Run(ChecklistRunArgs),
}

/// `checklist run NAME`.
#[derive(Debug, clap::Args)]
pub struct ChecklistRunArgs {
    /// The checklist (see `checklist list`), or a TOML file.
    pub name: String,
    /// Where the agent is (the local pair by default; changes on the peer
    /// need `wirescope agent --allow-tuning` there).
    #[command(flatten)]
    pub target: super::TargetArgs,
    /// Answer yes to every question (apply, roll back, save the kept changes).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// JSON-lines records (baseline, steps, summary) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Test runs before and after each change (default: the checklist's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: Option<u32>,
    /// This host's state directory (backups, journals, saved profiles).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<std::path::PathBuf>,
    /// Also write an HTML report of every test run (the baseline and each
    /// step), side by side, as `wirescope report` draws logs.
    #[arg(long, value_name = "PATH")]
    pub report: Option<std::path::PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::checklist::SHIPPED;

    #[test]
    fn every_shipped_checklist_is_a_valid_run() {
        for (name, _) in SHIPPED {
            let c = crate::tune::checklist::shipped(name).unwrap().unwrap();
            c.check_run(name, &check_run_args)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn a_checklist_with_a_bad_run_is_refused_naming_the_key() {
        let check = "[[check]]\nrule = \"tcp.buffer-limited\"\ntitle = \"x\"\n[check.change.sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 268435456\"\n";
        let c = crate::tune::checklist::Checklist::parse(
            &format!("name = \"t\"\n[test]\nrun = [\"--time\", \"soon\"]\n{check}"),
            "t.toml",
        )
        .unwrap();
        let e = c.check_run("t.toml", &check_run_args).unwrap_err();
        assert!(e.key == "test.run" && e.problem.contains("--time"), "{e}");
        let c = crate::tune::checklist::Checklist::parse(
            &format!("name = \"t\"\n[test]\nrun = []\nmetric = \"rate\"\n{check}"),
            "t.toml",
        )
        .unwrap();
        let e = c.check_run("t.toml", &check_run_args).unwrap_err();
        assert!(e.problem.contains("rr"), "{e}");
    }

    #[test]
    fn a_bad_run_is_named() {
        let step = TestStep {
            run: vec!["--mode".into(), "rr".into(), "--reverse".into()],
            metric: Metric::Throughput,
        };
        assert!(check_run_args(&step).unwrap_err().0.contains("--reverse"));
    }
}
