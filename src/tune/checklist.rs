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

use super::decide::Metric;
use super::profile::{check_profile_name, Matcher, Profile, ProfileError, MAX_TEXT};
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
    pub fn instantiate(&self, subject: &str) -> Result<String, String> {
        if !self.change.uses_subject() {
            return Ok(self.change_text.clone());
        }
        let iface = subject.split_whitespace().next().unwrap_or("");
        super::profile::check_interface_name(iface).map_err(|e| {
            format!(
                "check {} ({}): the finding's subject names no interface: {e}",
                self.index, self.rule
            )
        })?;
        self.with_subject(iface)
    }

    /// The change for the host across the pair from the finding's: its
    /// interface is not there, so `@subject` becomes `@route`, that host's
    /// interface towards the finding's.
    pub fn instantiate_across(&self) -> Result<String, String> {
        if !self.change.uses_subject() {
            return Ok(self.change_text.clone());
        }
        self.with_subject("@route")
    }

    fn with_subject(&self, iface: &str) -> Result<String, String> {
        let mut t: toml::Table = self.change_text.parse().map_err(|e| format!("{e}"))?;
        if let Some(toml::Value::Array(blocks)) = t.get_mut("interface") {
            for b in blocks {
                if let Some(m) = b.get_mut("match") {
                    if m.as_str() == Some("@subject") {
                        *m = toml::Value::String(iface.to_string());
                    }
                }
            }
        }
        toml::to_string(&t).map_err(|e| e.to_string())
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
}

fn err(
    file: &str,
    key: impl Into<String>,
    problem: impl Into<String>,
    allowed: impl Into<String>,
) -> ProfileError {
    ProfileError {
        file: file.to_string(),
        key: key.into(),
        problem: problem.into(),
        allowed: allowed.into(),
    }
}

fn rule_ids() -> Vec<&'static str> {
    crate::diagnose::impact::RULES
        .iter()
        .map(|r| r.id)
        .collect()
}

impl Checklist {
    /// Parse checklist text; `file` names it in errors.
    /// Check the test's arguments with `valid` (the real `wirescope run`
    /// parser, which lives above this module: the command line is the
    /// caller's) — skipped for an engine this build lacks (see
    /// [`Checklist::unavailable`]).
    pub fn check_run(
        &self,
        file: &str,
        valid: &dyn Fn(&TestStep) -> Result<(), String>,
    ) -> Result<(), ProfileError> {
        if self.unavailable().is_some() {
            return Ok(());
        }
        valid(&self.test).map_err(|e| err(file, "test.run", e, "arguments `wirescope run` accepts"))
    }

    pub fn parse(text: &str, file: &str) -> Result<Checklist, ProfileError> {
        if text.len() > MAX_TEXT {
            return Err(err(
                file,
                "file",
                format!("{} bytes is too large", text.len()),
                format!("at most {MAX_TEXT} bytes"),
            ));
        }
        let t: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            err(
                file,
                "syntax",
                e.message().to_string(),
                "fix the TOML syntax",
            )
        })?;
        let s = |k: &str, req: bool| -> Result<String, ProfileError> {
            match t.get(k) {
                Some(toml::Value::String(v)) => Ok(v.clone()),
                Some(_) => Err(err(file, k, "not a string", "a quoted string")),
                None if req => Err(err(file, k, "missing", format!("add {k} = \"...\""))),
                None => Ok(String::new()),
            }
        };
        for k in t.keys() {
            if ![
                "name",
                "description",
                "for",
                "rounds",
                "min_gain_pct",
                "test",
                "check",
            ]
            .contains(&k.as_str())
            {
                return Err(err(file, k, "unknown key", "a checklist has name, description, for, rounds, min_gain_pct, [test], [[check]]"));
            }
        }
        let name = s("name", true)?;
        check_profile_name(&name)
            .map_err(|e| err(file, "name", e, "letters, digits, '.', '-', '_'"))?;
        let rounds = match t.get("rounds") {
            None => 3,
            Some(toml::Value::Integer(n)) if (1..=MAX_ROUNDS as i64).contains(n) => *n as u32,
            Some(v) => {
                return Err(err(
                    file,
                    "rounds",
                    format!("{v} is out of range"),
                    format!("1 to {MAX_ROUNDS}"),
                ))
            }
        };
        let min_gain_pct = match t.get("min_gain_pct") {
            None => 1.0,
            Some(toml::Value::Float(f)) if (0.0..=100.0).contains(f) => *f,
            Some(toml::Value::Integer(i)) if (0..=100).contains(i) => *i as f64,
            Some(v) => {
                return Err(err(
                    file,
                    "min_gain_pct",
                    format!("{v} is out of range"),
                    "0 to 100",
                ))
            }
        };
        let test = parse_test(file, t.get("test"))?;
        let checks_v = t.get("check").and_then(|c| c.as_array()).ok_or_else(|| {
            err(
                file,
                "check",
                "missing",
                "add at least one [[check]] with rule, title and [check.change...]",
            )
        })?;
        if checks_v.is_empty() || checks_v.len() > MAX_CHECKS {
            return Err(err(
                file,
                "check",
                format!("{} checks", checks_v.len()),
                format!("1 to {MAX_CHECKS}"),
            ));
        }
        let mut checks = Vec::new();
        for (i, c) in checks_v.iter().enumerate() {
            checks.push(parse_check(file, &name, i + 1, c)?);
        }
        Ok(Checklist {
            description: s("description", false)?,
            purpose: s("for", false)?,
            name,
            rounds,
            min_gain_pct,
            test,
            checks,
            source: file.to_string(),
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

fn parse_test(file: &str, v: Option<&toml::Value>) -> Result<TestStep, ProfileError> {
    let t = v.and_then(|v| v.as_table()).ok_or_else(|| {
        err(
            file,
            "test",
            "missing",
            "add [test] with run = [\"--mode\", \"stream\", ...] and metric",
        )
    })?;
    for k in t.keys() {
        if k != "run" && k != "metric" {
            return Err(err(
                file,
                format!("test.{k}"),
                "unknown key",
                "[test] has run and metric",
            ));
        }
    }
    let run: Vec<String> = match t.get("run") {
        Some(toml::Value::Array(a)) if a.len() <= 64 => a
            .iter()
            .map(|x| x.as_str().filter(|s| s.len() <= 256).map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                err(
                    file,
                    "test.run",
                    "not a list of strings",
                    "a list of `wirescope run` arguments",
                )
            })?,
        _ => {
            return Err(err(
                file,
                "test.run",
                "missing or too long",
                "a list of up to 64 `wirescope run` arguments",
            ))
        }
    };
    for a in &run {
        let flag = a.split('=').next().unwrap_or(a);
        if RUNNER_FLAGS.contains(&flag) {
            return Err(err(
                file,
                "test.run",
                format!("{flag} is chosen by the checklist runner"),
                format!("remove it; not allowed: {}", RUNNER_FLAGS.join(", ")),
            ));
        }
    }
    let metric = match t.get("metric") {
        None => Metric::Throughput,
        Some(toml::Value::String(m)) => Metric::parse(m).ok_or_else(|| {
            err(
                file,
                "test.metric",
                format!("'{m}' is not a metric"),
                "throughput, rate or p99",
            )
        })?,
        Some(_) => {
            return Err(err(
                file,
                "test.metric",
                "not a string",
                "throughput, rate or p99",
            ))
        }
    };
    Ok(TestStep { run, metric })
}

fn parse_check(
    file: &str,
    list: &str,
    index: usize,
    v: &toml::Value,
) -> Result<Check, ProfileError> {
    let base = format!("[[check]] #{index}");
    let t = v.as_table().ok_or_else(|| {
        err(
            file,
            &base,
            "not a table",
            "rule, title and [check.change...]",
        )
    })?;
    for k in t.keys() {
        if !["rule", "subject", "title", "host", "change"].contains(&k.as_str()) {
            return Err(err(
                file,
                format!("{base} {k}"),
                "unknown key",
                "a check has rule, subject, title, host, change",
            ));
        }
    }
    let rule = t
        .get("rule")
        .and_then(|r| r.as_str())
        .ok_or_else(|| {
            err(
                file,
                format!("{base} rule"),
                "missing",
                "a rule id such as tcp.buffer-limited",
            )
        })?
        .to_string();
    let ids = rule_ids();
    if !ids.contains(&rule.as_str()) {
        return Err(err(
            file,
            format!("{base} rule"),
            format!("'{rule}' is not a rule id"),
            format!("one of {}", ids.join(", ")),
        ));
    }
    let subject = match t.get("subject") {
        None => None,
        Some(toml::Value::String(s)) if !s.is_empty() && s.len() <= 64 => Some(s.clone()),
        Some(_) => {
            return Err(err(
                file,
                format!("{base} subject"),
                "not a short string",
                "the start of the finding's subject, e.g. \"receive\"",
            ))
        }
    };
    let host = match t.get("host") {
        None => None,
        Some(toml::Value::String(h)) if h == "local" => Some(HostRole::Local),
        Some(toml::Value::String(h)) if h == "peer" => Some(HostRole::Peer),
        Some(v) => {
            return Err(err(
                file,
                format!("{base} host"),
                format!("{v} is not a host"),
                "\"local\" or \"peer\" (or leave it out: the test's direction decides)",
            ))
        }
    };
    let title = match t.get("title") {
        Some(toml::Value::String(s)) => s.clone(),
        _ => {
            return Err(err(
                file,
                format!("{base} title"),
                "missing",
                "what the change does, for people",
            ))
        }
    };
    let mut change = t
        .get("change")
        .and_then(|c| c.as_table())
        .cloned()
        .ok_or_else(|| {
            err(
                file,
                format!("{base} change"),
                "missing",
                "[check.change.sysctl], [[check.change.interface]] or [check.change.host]",
            )
        })?;
    if change.is_empty() {
        return Err(err(
            file,
            format!("{base} change"),
            "empty",
            "at least one setting",
        ));
    }
    for k in ["name", "description", "for"] {
        if change.contains_key(k) {
            return Err(err(
                file,
                format!("{base} change.{k}"),
                "set by the checklist",
                "only settings go in a change",
            ));
        }
    }
    // A change is a profile named after its step.
    let mut doc = toml::Table::new();
    doc.insert("name".into(), format!("{list}-{index}").into());
    doc.insert("description".into(), title.clone().into());
    doc.insert(
        "for".into(),
        format!("checklist {list}, check {index} ({rule})").into(),
    );
    for (k, v) in std::mem::take(&mut change) {
        doc.insert(k, v);
    }
    let change_text = toml::to_string(&doc).map_err(|e| {
        err(
            file,
            format!("{base} change"),
            e.to_string(),
            "profile settings",
        )
    })?;
    let profile =
        Profile::parse(&change_text, &format!("{file} {base} change")).map_err(|mut e| {
            e.file = file.to_string();
            e.key = format!("{base} change: {}", e.key);
            e
        })?;
    if profile.uses_subject() && !INTERFACE_RULES.contains(&rule.as_str()) {
        return Err(err(
            file,
            format!("{base} change"),
            format!("@subject, but findings of {rule} do not name an interface"),
            "match = \"@route\" or an interface name",
        ));
    }
    if profile
        .interfaces()
        .any(|b| matches!(b.matcher, Matcher::Glob(_)))
    {
        return Err(err(
            file,
            format!("{base} change"),
            "a glob would change interfaces the test does not use",
            "match = \"@subject\" or \"@route\"",
        ));
    }
    Ok(Check {
        index,
        rule,
        subject,
        title,
        host,
        change: profile,
        change_text,
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
}
