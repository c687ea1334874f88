//! Reading a checklist file: serde reads its keys (one struct per table,
//! `deny_unknown_fields`; each check's `change` is a profile's
//! [`RawProfile`]), then one validation pass checks the values, with errors
//! naming the file, the line and the key. A change's settings are checked
//! by the profile's own pass, at their lines in the checklist.

use super::{Check, Checklist, TestStep, INTERFACE_RULES, MAX_CHECKS, MAX_ROUNDS, RUNNER_FLAGS};
use crate::probe::sample::HostRole;
use crate::tune::decide::Metric;
use crate::tune::profile::check::{self as profile_check, Ctx};
use crate::tune::profile::raw::{dotted, At, AtValue, Doc, RawProfile, Spot, Step};
use crate::tune::profile::{check_profile_name, Matcher, Profile, ProfileError, MAX_TEXT};
use serde::Deserialize;
use toml::Value;

/// The keys of a checklist.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawChecklist {
    name: Option<At<String>>,
    description: Option<At<String>>,
    #[serde(rename = "for")]
    purpose: Option<At<String>>,
    rounds: Option<AtValue>,
    min_gain_pct: Option<AtValue>,
    test: Option<At<RawTest>>,
    check: Option<At<Vec<At<RawCheck>>>>,
}

/// The keys of `[test]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [test] table with run and metric")]
struct RawTest {
    run: Option<At<Vec<String>>>,
    metric: Option<At<String>>,
}

/// The keys of one `[[check]]`.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with rule, title and [check.change...]"
)]
struct RawCheck {
    rule: Option<At<String>>,
    subject: Option<At<String>>,
    title: Option<At<String>>,
    host: Option<At<String>>,
    change: Option<At<RawProfile>>,
}

const TOP_KEYS: &str =
    "a checklist has name, description, for, rounds, min_gain_pct, [test], [[check]]";
const TEST: &str = "add [test] with run = [\"--mode\", \"stream\", ...] and metric";
const RUN: &str = "a list of up to 64 `wirescope run` arguments";
const METRIC: &str = "throughput, rate or p99";
const CHECKS: &str = "add at least one [[check]] with rule, title and [check.change...]";
const CHECK: &str = "rule, title and [check.change...]";
const RULE: &str = "a rule id such as tcp.buffer-limited";
const SUBJECT: &str = "the start of the finding's subject, e.g. \"receive\"";
const TITLE: &str = "what the change does, for people";
const HOST: &str = "\"local\" or \"peer\" (or leave it out: the test's direction decides)";
const CHANGE: &str = "[check.change.sysctl], [[check.change.interface]] or [check.change.host]";

/// The key and what is allowed where serde refused a checklist.
fn describe(path: &[Step], doc: &toml::Table) -> Spot {
    let Some(Step::Key(top)) = path.first() else {
        return Spot::at("syntax", "a checklist is a TOML table");
    };
    let key = dotted(path);
    match top.as_str() {
        "name" | "description" | "for" => Spot::at(key, "a quoted string"),
        "rounds" => Spot::at(key, format!("1 to {MAX_ROUNDS}")),
        "min_gain_pct" => Spot::at(key, "0 to 100"),
        "test" => match path.get(1) {
            None => Spot::at("test", TEST),
            Some(Step::Key(k)) if k == "run" => Spot::at("test.run", RUN),
            Some(Step::Key(k)) if k == "metric" => Spot::at("test.metric", METRIC),
            Some(_) => Spot::unknown(key, "[test] has run and metric"),
        },
        "check" => describe_check(&path[1..], doc),
        _ => Spot::unknown(key, TOP_KEYS),
    }
}

fn describe_check(path: &[Step], doc: &toml::Table) -> Spot {
    let Some(Step::Index(i)) = path.first() else {
        return Spot::at("check", CHECKS);
    };
    let base = format!("[[check]] #{}", i + 1);
    let Some(Step::Key(k)) = path.get(1) else {
        return Spot::at(base, CHECK);
    };
    let key = format!("{base} {}", dotted(&path[1..]));
    match k.as_str() {
        "rule" => Spot::at(key, RULE),
        "subject" => Spot::at(key, SUBJECT),
        "title" => Spot::at(key, TITLE),
        "host" => Spot::at(key, HOST),
        "change" if path.len() == 2 => Spot::at(key, CHANGE),
        "change" => {
            let change = doc
                .get("check")
                .and_then(|c| c.get(*i))
                .and_then(|c| c.get("change"))
                .and_then(Value::as_table)
                .cloned()
                .unwrap_or_default();
            let spot = profile_check::describe(&path[2..], &change);
            Spot {
                key: format!("{base} change: {}", spot.key),
                ..spot
            }
        }
        _ => Spot::unknown(key, "a check has rule, subject, title, host, change"),
    }
}

/// Parse checklist text; `file` names it in errors.
pub fn checklist(text: &str, file: &str) -> Result<Checklist, ProfileError> {
    let doc = Doc { file, text };
    if text.len() > MAX_TEXT {
        let problem = format!("{} bytes is too large", text.len());
        return Err(doc.err(None, "file", problem, format!("at most {MAX_TEXT} bytes")));
    }
    let raw: RawChecklist = doc.read(describe)?;
    let cx = Ctx::new(&doc, "");
    let Some(name) = &raw.name else {
        return Err(cx.err("name", "missing", "add name = \"...\""));
    };
    check_profile_name(name.get_ref()).map_err(|e| {
        let allowed = "letters, digits, '.', '-', '_'";
        cx.at(name.span()).err("name", e.to_string(), allowed)
    })?;
    let name = name.get_ref().clone();
    let (rounds, min_gain_pct) = numbers(&cx, &raw)?;
    let test = test(&cx, raw.test.as_ref())?;
    let checks = checks(&cx, &name, raw.check.as_ref())?;
    let text_of = |s: Option<At<String>>| s.map(|s| s.into_inner()).unwrap_or_default();
    Ok(Checklist {
        run_line: raw
            .test
            .as_ref()
            .and_then(|t| t.get_ref().run.as_ref())
            .map(|r| doc.line(r.span().start)),
        description: text_of(raw.description),
        purpose: text_of(raw.purpose),
        name,
        rounds,
        min_gain_pct,
        test,
        checks,
        source: file.to_string(),
    })
}

/// `rounds` (default 3) and `min_gain_pct` (default 1).
fn numbers(cx: &Ctx, raw: &RawChecklist) -> Result<(u32, f64), ProfileError> {
    let rounds = match &raw.rounds {
        None => 3,
        Some(v) => match v.get_ref() {
            Value::Integer(n) if (1..=MAX_ROUNDS as i64).contains(n) => *n as u32,
            other => {
                let problem = format!("{other} is out of range");
                return Err(cx
                    .at(v.span())
                    .err("rounds", problem, format!("1 to {MAX_ROUNDS}")));
            }
        },
    };
    let min_gain_pct = match &raw.min_gain_pct {
        None => 1.0,
        Some(v) => match v.get_ref() {
            Value::Float(f) if (0.0..=100.0).contains(f) => *f,
            Value::Integer(i) if (0..=100).contains(i) => *i as f64,
            other => {
                let problem = format!("{other} is out of range");
                return Err(cx.at(v.span()).err("min_gain_pct", problem, "0 to 100"));
            }
        },
    };
    Ok((rounds, min_gain_pct))
}

fn test(cx: &Ctx, t: Option<&At<RawTest>>) -> Result<TestStep, ProfileError> {
    let Some(t) = t else {
        return Err(cx.err("test", "missing", TEST));
    };
    let cx = cx.at(t.span());
    let Some(run) = t.get_ref().run.as_ref().filter(|r| r.get_ref().len() <= 64) else {
        return Err(cx.err("test.run", "missing or too long", RUN));
    };
    let cx_run = cx.at(run.span());
    if run.get_ref().iter().any(|a| a.len() > 256) {
        let allowed = "a list of `wirescope run` arguments";
        return Err(cx_run.err("test.run", "not a list of strings", allowed));
    }
    for a in run.get_ref() {
        let flag = a.split('=').next().unwrap_or(a);
        if RUNNER_FLAGS.contains(&flag) {
            return Err(cx_run.err(
                "test.run",
                format!("{flag} is chosen by the checklist runner"),
                format!("remove it; not allowed: {}", RUNNER_FLAGS.join(", ")),
            ));
        }
    }
    let metric = match &t.get_ref().metric {
        None => Metric::Throughput,
        Some(m) => Metric::parse(m.get_ref()).ok_or_else(|| {
            let problem = format!("'{}' is not a metric", m.get_ref());
            cx.at(m.span()).err("test.metric", problem, METRIC)
        })?,
    };
    Ok(TestStep {
        run: run.get_ref().clone(),
        metric,
    })
}

fn checks(
    cx: &Ctx,
    list: &str,
    checks: Option<&At<Vec<At<RawCheck>>>>,
) -> Result<Vec<Check>, ProfileError> {
    let Some(checks) = checks else {
        return Err(cx.err("check", "missing", CHECKS));
    };
    let n = checks.get_ref().len();
    if n == 0 || n > MAX_CHECKS {
        let allowed = format!("1 to {MAX_CHECKS}");
        return Err(cx
            .at(checks.span())
            .err("check", format!("{n} checks"), allowed));
    }
    let mut out = Vec::new();
    for (i, c) in checks.get_ref().iter().enumerate() {
        out.push(check(&cx.at(c.span()), list, i + 1, c.get_ref())?);
    }
    Ok(out)
}

fn rule_ids() -> Vec<&'static str> {
    crate::diagnose::impact::RULES
        .iter()
        .map(|r| r.id)
        .collect()
}

fn check(cx: &Ctx, list: &str, index: usize, c: &RawCheck) -> Result<Check, ProfileError> {
    let base = format!("[[check]] #{index}");
    let Some(rule) = &c.rule else {
        return Err(cx.err(format!("{base} rule"), "missing", RULE));
    };
    let ids = rule_ids();
    if !ids.contains(&rule.get_ref().as_str()) {
        return Err(cx.at(rule.span()).err(
            format!("{base} rule"),
            format!("'{}' is not a rule id", rule.get_ref()),
            format!("one of {}", ids.join(", ")),
        ));
    }
    let rule = rule.get_ref().clone();
    let subject = match &c.subject {
        Some(s) if s.get_ref().is_empty() || s.get_ref().len() > 64 => {
            let key = format!("{base} subject");
            return Err(cx.at(s.span()).err(key, "not a short string", SUBJECT));
        }
        s => s.as_ref().map(|s| s.get_ref().clone()),
    };
    let host = match &c.host {
        None => None,
        Some(h) if h.get_ref() == "local" => Some(HostRole::Local),
        Some(h) if h.get_ref() == "peer" => Some(HostRole::Peer),
        Some(h) => {
            let problem = format!("\"{}\" is not a host", h.get_ref());
            return Err(cx.at(h.span()).err(format!("{base} host"), problem, HOST));
        }
    };
    let Some(title) = c.title.as_ref().map(|t| t.get_ref().clone()) else {
        return Err(cx.err(format!("{base} title"), "missing", TITLE));
    };
    let head = Head {
        list,
        index,
        rule: &rule,
        title: &title,
    };
    let (change, change_text, change_table) = change(cx, &head, c.change.as_ref())?;
    Ok(Check {
        index,
        rule,
        subject,
        title,
        host,
        change,
        change_text,
        change_table,
    })
}

/// What a check's change is named after.
struct Head<'a> {
    list: &'a str,
    index: usize,
    rule: &'a str,
    title: &'a str,
}

/// A check's change: a profile named after its step, checked where the
/// checklist holds it, and its text (with the table it is written from).
fn change(
    cx: &Ctx,
    h: &Head,
    raw: Option<&At<RawProfile>>,
) -> Result<(Profile, String, toml::Table), ProfileError> {
    let key = format!("[[check]] #{} change", h.index);
    let Some(raw) = raw else {
        return Err(cx.err(key, "missing", CHANGE));
    };
    let cx = cx.at(raw.span());
    let raw = raw.get_ref();
    for (k, set) in [
        ("name", raw.name.as_ref()),
        ("description", raw.description.as_ref()),
        ("for", raw.purpose.as_ref()),
    ] {
        if let Some(v) = set {
            let e = cx.at(v.span());
            return Err(e.err(
                format!("{key}.{k}"),
                "set by the checklist",
                "only settings go in a change",
            ));
        }
    }
    if raw.sections().is_empty() {
        return Err(cx.err(key, "empty", "at least one setting"));
    }
    let prefix = format!("{key}: ");
    let profile = Profile {
        name: format!("{}-{}", h.list, h.index),
        description: h.title.to_string(),
        purpose: format!("checklist {}, check {} ({})", h.list, h.index, h.rule),
        sections: profile_check::sections(&cx.with_prefix(&prefix), raw)?,
        source: format!("{} {key}", cx.file()),
    };
    check_profile_name(&profile.name).map_err(|e| {
        let allowed = "letters, digits, '.', '-' and '_', e.g. throughput-100g";
        cx.err(format!("{prefix}name"), e.to_string(), allowed)
    })?;
    if profile.uses_subject() && !INTERFACE_RULES.contains(&h.rule) {
        return Err(cx.err(
            &key,
            format!(
                "@subject, but findings of {} do not name an interface",
                h.rule
            ),
            "match = \"@route\" or an interface name",
        ));
    }
    if profile
        .interfaces()
        .any(|b| matches!(b.matcher, Matcher::Glob(_)))
    {
        return Err(cx.err(
            &key,
            "a glob would change interfaces the test does not use",
            "match = \"@subject\" or \"@route\"",
        ));
    }
    let mut table = toml::Table::new();
    table.insert("name".into(), profile.name.clone().into());
    table.insert("description".into(), profile.description.clone().into());
    table.insert("for".into(), profile.purpose.clone().into());
    table.extend(raw.settings_table());
    let text =
        toml::to_string(&table).map_err(|e| cx.err(&key, e.to_string(), "profile settings"))?;
    if text.len() > MAX_TEXT {
        let problem = format!("{} bytes as a profile", text.len());
        return Err(cx.err(&key, problem, format!("at most {MAX_TEXT} bytes")));
    }
    Ok((profile, text, table))
}
