//! The checklist file: a baseline test, then checks keyed by diagnosis rule
//! ids, each with the change it proposes written as a profile fragment.
//!
//! ```toml
//! name = "single-stream"
//! description = "..."
//! for = "single-stream TCP throughput"
//! rounds = 3                  # default for --rounds
//! min_gain_pct = 1.0          # a change must gain more than this (and than the spread)
//! [test]
//! run = ["--mode", "stream", "--streams", "1", "--time", "10s"]   # `wirescope run` arguments
//! metric = "throughput"       # throughput | rate | p99
//!
//! [[check]]
//! rule = "tcp.buffer-limited" # a rule id (assets/rules.md)
//! subject = "receive"         # optional: only findings whose subject starts with this
//! host = "peer"               # optional: always this host (else see below)
//! title = "Raise the TCP receive buffer limit"
//! [check.change.sysctl]       # the change: any profile section
//! "net.ipv4.tcp_rmem" = "4096 131072 268435456"
//!
//! [[check]]
//! rule = "nic.gro-off"
//! title = "Turn GRO on"
//! [[check.change.interface]]
//! match = "@subject"          # the interface the finding names
//! features = { gro = true }
//! ```
//!
//! The change goes through the profile machinery (validation, backup,
//! journal, rollback) on the host [`super::side`] chooses: the check's
//! `host` if it names one, the host that receives (or sends) the test's
//! data for a receive-side (send-side) change, else the host the finding
//! names. `@subject` is replaced
//! by the finding's interface before the fragment is applied; `@route`
//! means the interface towards the other host. Parsing checks everything
//! that holds on any host: rule ids exist, fragments parse as profiles,
//! `@subject` only for rules about an interface, the test arguments parse
//! as a `wirescope run` command line (engines this build lacks are reported
//! by [`Checklist::unavailable`], not as a format error).

mod parse;

use super::decide::Metric;
use super::profile::{NameError, Profile, ProfileError};
use crate::probe::sample::HostRole;

/// The checklists shipped with wirescope: (name, text).
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "single-stream",
        include_str!("../../assets/checklists/single-stream.toml"),
    ),
    (
        "multi-stream-100g",
        include_str!("../../assets/checklists/multi-stream-100g.toml"),
    ),
    (
        "small-rpcs",
        include_str!("../../assets/checklists/small-rpcs.toml"),
    ),
    ("rdma", include_str!("../../assets/checklists/rdma.toml")),
];

/// Rules whose finding subject starts with an interface name (`@subject` allowed).
pub const INTERFACE_RULES: &[&str] = &[
    "nic.few-queues",
    "nic.gro-off",
    "nic.tso-off",
    "nic.mtu-small",
    "nic.queue-imbalance",
    "nic.ring-small",
    "nic.rx-out-of-buffer",
    "nic.discards-phy",
    "nic.pause-frames",
    "irq.single-cpu",
    "irq.remote-numa",
    "irqbalance.conflict",
    "qdisc.shaping",
];

/// `wirescope run` flags a checklist may not set: the runner decides them.
pub const RUNNER_FLAGS: &[&str] = &[
    "--peer",
    "--local-pair",
    "--pair-queues",
    "--token-file",
    "--log",
    "--json",
    "--fail-on",
];

/// Most rounds per measurement.
pub const MAX_ROUNDS: u32 = 20;
/// Most checks in a checklist.
pub const MAX_CHECKS: usize = 64;

/// The baseline test.
#[derive(Debug, Clone, PartialEq)]
pub struct TestStep {
    /// `wirescope run` arguments.
    pub run: Vec<String>,
    /// What is compared.
    pub metric: Metric,
}

/// One check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// 1-based position.
    pub index: usize,
    /// Rule id.
    pub rule: String,
    /// Only findings whose subject starts with this.
    pub subject: Option<String>,
    /// What the change is, for people.
    pub title: String,
    /// `host`: the host the change always goes to, when the check names one.
    pub host: Option<HostRole>,
    /// The change as a profile.
    pub change: Profile,
    /// The change as profile text (what is sent to a peer).
    pub change_text: String,
    /// The same as a TOML table, where `@subject` is replaced.
    pub change_table: toml::Table,
}

/// Why a check's change cannot be made for a finding.
#[derive(Debug, thiserror::Error)]
pub enum InstantiateError {
    /// `@subject`, but the finding names no interface.
    #[error("check {index} ({rule}): the finding's subject names no interface: {source}")]
    NoInterface {
        /// The check.
        index: usize,
        /// Its rule.
        rule: String,
        /// Why the subject's first word is not an interface.
        #[source]
        source: NameError,
    },
    /// The change could not be written as TOML.
    #[error("check {index} ({rule}): cannot write the change as TOML: {source}")]
    Write {
        /// The check.
        index: usize,
        /// Its rule.
        rule: String,
        /// The serializer's error.
        #[source]
        source: toml::ser::Error,
    },
}

impl Check {
    /// Does this finding (id, subject) call for this check?
    pub fn matches(&self, rule: &str, subject: &str) -> bool {
        self.rule == rule
            && self
                .subject
                .as_deref()
                .is_none_or(|s| subject.starts_with(s))
    }

    /// The change for a finding about `subject` (its first word is the
    /// interface for `@subject`): profile text with `@subject` replaced.
    pub fn instantiate(&self, subject: &str) -> Result<String, InstantiateError> {
        if !self.change.uses_subject() {
            return Ok(self.change_text.clone());
        }
        let iface = subject.split_whitespace().next().unwrap_or("");
        super::profile::check_interface_name(iface).map_err(|source| {
            InstantiateError::NoInterface {
                index: self.index,
                rule: self.rule.clone(),
                source,
            }
        })?;
        self.with_subject(iface)
    }

    /// The change for the host across the pair from the finding's: its
    /// interface is not there, so `@subject` becomes `@route`, that host's
    /// interface towards the finding's.
    pub fn instantiate_across(&self) -> Result<String, InstantiateError> {
        if !self.change.uses_subject() {
            return Ok(self.change_text.clone());
        }
        self.with_subject("@route")
    }

    fn with_subject(&self, iface: &str) -> Result<String, InstantiateError> {
        let mut t = self.change_table.clone();
        if let Some(toml::Value::Array(blocks)) = t.get_mut("interface") {
            for b in blocks {
                if let Some(m) = b.get_mut("match") {
                    if m.as_str() == Some("@subject") {
                        *m = toml::Value::String(iface.to_string());
                    }
                }
            }
        }
        toml::to_string(&t).map_err(|source| InstantiateError::Write {
            index: self.index,
            rule: self.rule.clone(),
            source,
        })
    }
}

/// A parsed checklist.
#[derive(Debug, Clone, PartialEq)]
pub struct Checklist {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `for`.
    pub purpose: String,
    /// Default rounds per measurement.
    pub rounds: u32,
    /// Smallest gain (%) that counts, besides beating the spread.
    pub min_gain_pct: f64,
    /// The test run before and after each change.
    pub test: TestStep,
    /// Checks in order.
    pub checks: Vec<Check>,
    /// Where it came from.
    pub source: String,
    /// The line of `test.run` in the file, for errors about its arguments.
    pub run_line: Option<usize>,
}

impl Checklist {
    /// Parse checklist text; `file` names it in errors. Serde reads the
    /// keys, one validation pass their values (`checklist/parse.rs`).
    pub fn parse(text: &str, file: &str) -> Result<Checklist, ProfileError> {
        parse::checklist(text, file)
    }

    /// Check the test's arguments with `valid` (the real `wirescope run`
    /// parser, which lives above this module: the command line is the
    /// caller's) — skipped for an engine this build lacks (see
    /// [`Checklist::unavailable`]).
    pub fn check_run<E: std::fmt::Display>(
        &self,
        file: &str,
        valid: &dyn Fn(&TestStep) -> Result<(), E>,
    ) -> Result<(), ProfileError> {
        if self.unavailable().is_some() {
            return Ok(());
        }
        valid(&self.test).map_err(|e| ProfileError {
            file: file.to_string(),
            line: self.run_line,
            key: "test.run".into(),
            problem: e.to_string(),
            allowed: "arguments `wirescope run` accepts".into(),
        })
    }

    /// The engine named by the test's `--engine`, if this build does not
    /// have it: the checklist is valid but cannot run here.
    pub fn unavailable(&self) -> Option<String> {
        let engine = engine_arg(&self.test.run)?;
        let known = <crate::traffic::EngineKind as clap::ValueEnum>::value_variants()
            .iter()
            .any(|e| e.name() == engine);
        (!known).then(|| format!("checklist {} needs the {engine} engine, which this build of wirescope does not have", self.name))
    }

    /// The checks a finding calls for.
    pub fn checks_for<'a>(
        &'a self,
        rule: &'a str,
        subject: &'a str,
    ) -> impl Iterator<Item = &'a Check> + 'a {
        self.checks.iter().filter(move |c| c.matches(rule, subject))
    }
}

fn engine_arg(args: &[String]) -> Option<&str> {
    args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--engine=").or_else(|| {
            (a == "--engine")
                .then(|| args.get(i + 1).map(String::as_str))
                .flatten()
        })
    })
}

/// A shipped checklist by name.
pub fn shipped(name: &str) -> Option<Result<Checklist, ProfileError>> {
    SHIPPED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| Checklist::parse(text, &format!("assets/checklists/{n}.toml")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_checklist_parses() {
        for (name, _) in SHIPPED {
            let c = shipped(name)
                .unwrap()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.name, *name);
            assert!(!c.checks.is_empty() && !c.purpose.is_empty());
            // Either the test arguments are a valid `run` command here, or the
            // engine is one this build lacks and the checklist says so.
            if let Some(why) = c.unavailable() {
                assert!(why.contains("engine"), "{why}");
            }
        }
    }

    fn parse(extra: &str) -> Result<Checklist, ProfileError> {
        let text = format!(
            "name = \"t\"\n[test]\nrun = [\"--mode\", \"stream\", \"--time\", \"5s\"]\n{extra}"
        );
        Checklist::parse(&text, "t.toml")
    }

    #[test]
    fn checks_are_validated() {
        let ok = parse("[[check]]\nrule = \"nic.gro-off\"\ntitle = \"gro\"\n[[check.change.interface]]\nmatch = \"@subject\"\nfeatures = { gro = true }\n").unwrap();
        let c = &ok.checks[0];
        assert!(c.matches("nic.gro-off", "veth-b"));
        let text = c.instantiate("veth-b").unwrap();
        assert!(text.contains("match = \"veth-b\""), "{text}");
        Profile::parse(&text, "x").unwrap();
        assert!(c.instantiate("cpu3 x").is_ok());

        let e = parse("[[check]]\nrule = \"nic.nope\"\ntitle = \"x\"\n[check.change.sysctl]\n\"net.core.rmem_max\" = \"1\"\n").unwrap_err();
        assert!(
            e.problem.contains("not a rule id") && e.allowed.contains("tcp.buffer-limited"),
            "{e}"
        );
        let e = parse("[[check]]\nrule = \"cpu.governor\"\ntitle = \"x\"\n[[check.change.interface]]\nmatch = \"@subject\"\nmtu = 9000\n").unwrap_err();
        assert!(e.problem.contains("do not name an interface"), "{e}");
        let e = parse("[[check]]\nrule = \"cpu.governor\"\ntitle = \"x\"\n[check.change.host]\ngovernor = \"fast!\"\n").unwrap_err();
        assert!(e.key.contains("[[check]] #1 change: host.governor"), "{e}");
        let e = Checklist::parse(
            "name = \"t\"\n[test]\nrun = [\"--peer\", \"x\"]\n[[check]]\n",
            "t.toml",
        )
        .unwrap_err();
        assert!(e.problem.contains("--peer"), "{e}");
        let s = parse("[[check]]\nrule = \"tcp.buffer-limited\"\nsubject = \"receive\"\ntitle = \"x\"\n[check.change.sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 268435456\"\n").unwrap();
        assert!(s.checks_for("tcp.buffer-limited", "receive").count() == 1);
        assert!(s.checks_for("tcp.buffer-limited", "send").count() == 0);
    }

    #[test]
    fn errors_in_a_change_name_their_line_in_the_checklist() {
        // Line 8 of the checklist file (the fragment used to be re-parsed
        // as separate text, where no line of this file could be named).
        let e = parse("[[check]]\nrule = \"cpu.governor\"\ntitle = \"x\"\n[check.change.host]\ngovernor = \"fast!\"\n").unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        assert!(
            e.to_string()
                .starts_with("t.toml:8: [[check]] #1 change: host.governor: "),
            "{e}"
        );
        let e = parse("[[check]]\nrule = \"nic.gro-off\"\ntitle = \"x\"\n[[check.change.interface]]\nmatch = \"@subject\"\nfeatures = { gro = true }\nspeed = 1\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str(), e.problem.as_str()),
            (
                Some(10),
                "[[check]] #1 change: [[interface]] #1 (match @subject) speed",
                "unknown key"
            )
        );
        let e = parse("[[check]]\nrule = \"nic.gro-off\"\nwhy = \"x\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(6), "[[check]] #1 why"),
            "{e}"
        );
    }

    #[test]
    fn the_change_text_is_the_change_as_a_profile() {
        let c = parse("[[check]]\nrule = \"nic.gro-off\"\ntitle = \"gro\"\n[[check.change.interface]]\nmatch = \"@route\"\nrps-cpus = \"f\"\nfeatures.gro = true\n").unwrap();
        let c = &c.checks[0];
        let p = Profile::parse(&c.change_text, "sent").unwrap();
        assert_eq!((p.name.as_str(), p.description.as_str()), ("t-1", "gro"));
        assert_eq!(p.sections, c.change.sections);
        assert_eq!(c.instantiate("veth-b").unwrap(), c.change_text);
    }
}
