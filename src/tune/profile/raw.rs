//! The profile file as serde reads it: which keys exist at which level
//! (`deny_unknown_fields`, one struct per table) and where each value sits
//! in the file. Values whose form varies (`"max"` or a table, a mask or a
//! per-queue table) stay TOML values here; [`super::check`] gives them their
//! meaning. Also the one mapping from a TOML or serde error to a
//! [`ProfileError`] with the file, the line and the key, which checklists
//! share.
//!
//! This module decides nothing about values: a key that exists with a value
//! of any shape it may have passes.

use super::ProfileError;
use indexmap::IndexMap;
use serde::Deserialize;
use std::ops::Range;
use toml::{Spanned, Value};

/// A value and its byte range in the file.
pub type At<T> = Spanned<T>;
/// A TOML value and its byte range; the validation pass reads its meaning.
pub type AtValue = At<Value>;
/// A table whose keys are names (sysctls, features, ...), in file order.
pub type Entries = IndexMap<String, AtValue>;

/// The keys of a profile (and of a checklist's `change`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct RawProfile {
    /// `name`.
    pub name: Option<At<String>>,
    /// `description`.
    pub description: Option<At<String>>,
    /// `for`.
    #[serde(rename = "for")]
    pub purpose: Option<At<String>>,
    /// `[sysctl]`.
    pub sysctl: Option<At<Entries>>,
    /// The `[[interface]]` blocks.
    pub interface: Option<At<Vec<At<RawInterface>>>>,
    /// `[host]`.
    pub host: Option<At<RawHost>>,
}

/// The keys of one `[[interface]]` block. Spellings with `-` for `_` (and
/// the sysfs names `rps_cpus`, `xps_cpus`) are the same key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with `match` and settings")]
pub struct RawInterface {
    /// `match`.
    #[serde(rename = "match")]
    pub matcher: Option<At<String>>,
    /// `mtu`.
    pub mtu: Option<AtValue>,
    /// `channels`.
    pub channels: Option<AtValue>,
    /// `rings`.
    pub rings: Option<AtValue>,
    /// `coalesce`.
    pub coalesce: Option<At<Entries>>,
    /// `features`.
    pub features: Option<At<Entries>>,
    /// `pause`.
    pub pause: Option<At<Entries>>,
    /// `rps`.
    #[serde(alias = "rps-cpus", alias = "rps_cpus")]
    pub rps: Option<AtValue>,
    /// `xps`.
    #[serde(alias = "xps-cpus", alias = "xps_cpus")]
    pub xps: Option<AtValue>,
    /// `rps_flow_cnt`.
    #[serde(alias = "rps-flow-cnt", alias = "rps_flow-cnt", alias = "rps-flow_cnt")]
    pub rps_flow_cnt: Option<AtValue>,
    /// `irq_affinity`.
    #[serde(alias = "irq-affinity")]
    pub irq_affinity: Option<AtValue>,
}

/// The keys of `[host]`.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [host] table with governor, irqbalance"
)]
pub struct RawHost {
    /// `governor`.
    pub governor: Option<AtValue>,
    /// `irqbalance`.
    pub irqbalance: Option<AtValue>,
}

/// A setting's value as the file holds it: a table of names or any value.
#[derive(Debug, Clone, Copy)]
pub enum Written<'a> {
    /// A value of any shape.
    Value(&'a AtValue),
    /// A table of names (`coalesce`, `features`, `pause`).
    Table(&'a At<Entries>),
}

impl Written<'_> {
    /// Its byte range.
    pub fn span(&self) -> Range<usize> {
        match self {
            Written::Value(v) => v.span(),
            Written::Table(t) => t.span(),
        }
    }

    /// As a plain TOML value.
    pub fn to_value(self) -> Value {
        match self {
            Written::Value(v) => v.get_ref().clone(),
            Written::Table(t) => Value::Table(plain(t.get_ref())),
        }
    }
}

fn plain(e: &Entries) -> toml::Table {
    e.iter()
        .map(|(k, v)| (k.clone(), v.get_ref().clone()))
        .collect()
}

impl RawInterface {
    /// The settings as written, in file order, by their key's one spelling.
    pub fn settings(&self) -> Vec<(&'static str, Written<'_>)> {
        fn v(x: &Option<AtValue>) -> Option<Written<'_>> {
            x.as_ref().map(Written::Value)
        }
        fn t(x: &Option<At<Entries>>) -> Option<Written<'_>> {
            x.as_ref().map(Written::Table)
        }
        let mut out: Vec<(&'static str, Written<'_>)> = [
            ("mtu", v(&self.mtu)),
            ("channels", v(&self.channels)),
            ("rings", v(&self.rings)),
            ("coalesce", t(&self.coalesce)),
            ("features", t(&self.features)),
            ("pause", t(&self.pause)),
            ("rps", v(&self.rps)),
            ("xps", v(&self.xps)),
            ("rps_flow_cnt", v(&self.rps_flow_cnt)),
            ("irq_affinity", v(&self.irq_affinity)),
        ]
        .into_iter()
        .filter_map(|(k, w)| w.map(|w| (k, w)))
        .collect();
        out.sort_by_key(|(_, w)| w.span().start);
        out
    }
}

impl RawHost {
    /// The settings as written, in file order.
    pub fn settings(&self) -> Vec<(&'static str, &AtValue)> {
        let mut out: Vec<(&'static str, &AtValue)> = [
            ("governor", self.governor.as_ref()),
            ("irqbalance", self.irqbalance.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, w)| w.map(|w| (k, w)))
        .collect();
        out.sort_by_key(|(_, w)| w.span().start);
        out
    }
}

/// One section as written.
#[derive(Debug, Clone, Copy)]
pub enum RawSection<'a> {
    /// `[sysctl]`.
    Sysctl(&'a At<Entries>),
    /// The `[[interface]]` blocks (TOML keeps them together).
    Interfaces(&'a At<Vec<At<RawInterface>>>),
    /// `[host]`.
    Host(&'a At<RawHost>),
}

impl RawProfile {
    /// The sections in file order (settings are applied in this order).
    pub fn sections(&self) -> Vec<RawSection<'_>> {
        let mut out: Vec<(usize, RawSection<'_>)> = Vec::new();
        if let Some(s) = &self.sysctl {
            out.push((s.span().start, RawSection::Sysctl(s)));
        }
        if let Some(i) = &self.interface {
            out.push((i.span().start, RawSection::Interfaces(i)));
        }
        if let Some(h) = &self.host {
            out.push((h.span().start, RawSection::Host(h)));
        }
        out.sort_by_key(|(start, _)| *start);
        out.into_iter().map(|(_, s)| s).collect()
    }

    /// The settings as a TOML table in file order (a checklist change is
    /// sent to a peer as profile text made from it).
    pub fn settings_table(&self) -> toml::Table {
        let mut t = toml::Table::new();
        for s in self.sections() {
            match s {
                RawSection::Sysctl(e) => {
                    t.insert("sysctl".into(), Value::Table(plain(e.get_ref())));
                }
                RawSection::Interfaces(blocks) => {
                    let v = blocks.get_ref().iter().map(|b| block_table(b.get_ref()));
                    t.insert("interface".into(), Value::Array(v.collect()));
                }
                RawSection::Host(h) => {
                    let h = h.get_ref().settings().into_iter();
                    let h = h.map(|(k, v)| (k.to_string(), v.get_ref().clone()));
                    t.insert("host".into(), Value::Table(h.collect()));
                }
            }
        }
        t
    }
}

fn block_table(b: &RawInterface) -> Value {
    let mut t = toml::Table::new();
    if let Some(m) = &b.matcher {
        t.insert("match".into(), Value::String(m.get_ref().clone()));
    }
    for (k, w) in b.settings() {
        t.insert(k.into(), w.to_value());
    }
    Value::Table(t)
}

/// One step of the path to a key: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A key.
    Key(String),
    /// A 0-based index.
    Index(usize),
}

/// What an error says about the place serde refused: the key as messages
/// write it, what is allowed there, and whether the key is one the table
/// does not have (then the problem is "unknown key").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spot {
    /// The key.
    pub key: String,
    /// What is allowed there.
    pub allowed: String,
    /// The table has no such key.
    pub unknown: bool,
}

impl Spot {
    /// A key the table has, holding the wrong shape.
    pub fn at(key: impl Into<String>, allowed: impl Into<String>) -> Spot {
        Spot {
            key: key.into(),
            allowed: allowed.into(),
            unknown: false,
        }
    }

    /// A key the table does not have.
    pub fn unknown(key: impl Into<String>, allowed: impl Into<String>) -> Spot {
        Spot {
            unknown: true,
            ..Spot::at(key, allowed)
        }
    }
}

/// A file's text and its name in messages.
#[derive(Debug, Clone)]
pub struct Doc<'a> {
    /// The file, as messages name it.
    pub file: &'a str,
    /// Its text (spans index into it).
    pub text: &'a str,
}

impl Doc<'_> {
    /// The 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        self.text
            .get(..offset)
            .map(|t| t.matches('\n').count() + 1)
            .unwrap_or(1)
    }

    /// An error at `span` (None: no line).
    pub fn err(
        &self,
        span: Option<Range<usize>>,
        key: impl Into<String>,
        problem: impl Into<String>,
        allowed: impl Into<String>,
    ) -> ProfileError {
        ProfileError {
            file: self.file.to_string(),
            line: span.map(|s| self.line(s.start)),
            key: key.into(),
            problem: problem.into(),
            allowed: allowed.into(),
        }
    }

    /// Read `T` from the text. A syntax error names its line; a key or a
    /// shape serde refuses names its line and its key, which `describe`
    /// writes (with what is allowed there) from the path and the document
    /// as a plain table.
    pub fn read<T: serde::de::DeserializeOwned>(
        &self,
        describe: fn(&[Step], &toml::Table) -> Spot,
    ) -> Result<T, ProfileError> {
        let de = toml::Deserializer::parse(self.text).map_err(|e| {
            let at = e.span().map(|s| format!(" at line {}", self.line(s.start)));
            self.err(
                e.span(),
                "syntax",
                e.message().trim_end().to_string(),
                format!("fix the TOML syntax{}", at.unwrap_or_default()),
            )
        })?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = steps(e.path());
            let table: toml::Table = self.text.parse().unwrap_or_default();
            let spot = describe(&path, &table);
            let inner = e.into_inner();
            let problem = match spot.unknown {
                true => "unknown key".to_string(),
                false => inner.message().trim_end().to_string(),
            };
            self.err(inner.span(), spot.key, problem, spot.allowed)
        })
    }
}

/// The path serde followed, without the steps `Spanned` adds.
fn steps(p: &serde_path_to_error::Path) -> Vec<Step> {
    use serde_path_to_error::Segment;
    p.iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Map { key } if key.starts_with("$__serde_spanned") => None,
            Segment::Map { key } => Some(Step::Key(key.clone())),
            Segment::Enum { variant } => Some(Step::Key(variant.clone())),
            Segment::Unknown => None,
        })
        .collect()
}

/// `path` as messages write a key below a table: `a.b.c`, `[2]` for an index.
pub fn dotted(path: &[Step]) -> String {
    let mut s = String::new();
    for p in path {
        match p {
            Step::Key(k) if s.is_empty() => s.push_str(k),
            Step::Key(k) => s.push_str(&format!(".{k}")),
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}
