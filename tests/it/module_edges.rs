//! The crate's modules form layers; a module imports only the layers below
//! it, and the files inside one top-level module import each other without
//! cycles. This test reads every `crate::` and `super::` path in `src/`
//! (test code excluded: files named `tests.rs` and everything from a
//! `#[cfg(test)]` line on) and fails on any edge the layering does not allow.
//!
//! The allowed graph is kept here, next to the check: [`LAYERS`], bottom
//! first. `main.rs` and `lib.rs` are the roots and may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules, lowest layer first. A module may import any module
/// listed before it (never after it, never one of the same layer unless it
/// is listed before it).
const LAYERS: &[&str] = &[
    "units", "traffic", "probe", "diagnose", "tune", "session", "record", "fleet", "cli", "face",
    "tui",
];

/// The file's text without its test code and without comments (doc links
/// are not imports).
fn production_text(p: &Path) -> Option<String> {
    if p.file_name().is_some_and(|n| n == "tests.rs") {
        return None;
    }
    let text = std::fs::read_to_string(p).expect("read source");
    let end = text
        .lines()
        .scan(0usize, |off, l| {
            let start = *off;
            *off += l.len() + 1;
            Some((start, l))
        })
        .find(|(_, l)| l.trim_start().starts_with("#[cfg(test)]"))
        .map(|(start, _)| start)
        .unwrap_or(text.len());
    Some(
        text[..end]
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// First path components after `prefix` in `text`, including `prefix{a, b::c}` groups.
fn targets(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        // Not part of a longer path (`super::super::x` is handled by its first `super::`).
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for item in inner.split(',') {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                if !first.is_empty() && first != "self" {
                    out.insert(first.to_string());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "super" {
                out.insert(name);
            }
        }
    }
    out
}

struct Graph {
    /// top-level module → modules it uses.
    top: BTreeMap<String, BTreeSet<String>>,
    /// (top-level module, child) → children of the same top-level module it uses.
    inner: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = crate::common::src_files();
    let mut g = Graph {
        top: BTreeMap::new(),
        inner: BTreeMap::new(),
    };
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        let top = parts[0].clone();
        if top == "main" || top == "lib" {
            continue;
        }
        let Some(text) = production_text(&f) else {
            continue;
        };
        // The child module this file belongs to (None for the module's own mod.rs / top file).
        let child = match parts.len() {
            1 => None,
            2 if parts[1] == "mod" => None,
            _ => Some(parts[1].clone()),
        };
        let uses = targets(&text, "crate::");
        for t in &uses {
            if *t != top {
                g.top.entry(top.clone()).or_default().insert(t.clone());
            }
        }
        let Some(child) = child else {
            continue;
        };
        let mut siblings: BTreeSet<String> = text
            .split("crate::")
            .skip(1)
            .filter_map(|r| r.strip_prefix(&format!("{top}::")))
            .map(|r| {
                r.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .collect();
        // `super::x` from a file directly below the top-level module names a sibling.
        if parts.len() == 2 || (parts.len() == 3 && parts[2] == "mod") {
            siblings.extend(targets(&text, "super::"));
        } else {
            siblings.extend(targets(&text, "super::super::"));
        }
        siblings.remove(&child);
        // Only the module's own files and folders are nodes (a name like
        // `crate::traffic::alloc_buf` is an item of the module itself).
        let dir = src.join(&top);
        siblings.retain(|s| dir.join(format!("{s}.rs")).exists() || dir.join(s).is_dir());
        g.inner
            .entry(top.clone())
            .or_default()
            .entry(child)
            .or_default()
            .extend(siblings);
    }
    g
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let g = graph();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut bad = Vec::new();
    for (from, tos) in &g.top {
        let Some(rf) = rank(from) else {
            bad.push(format!("{from}: not in LAYERS; add it where it belongs"));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(rt) if rt < rf => {}
                Some(_) => bad.push(format!("{from} -> {to}")),
                None => bad.push(format!("{from} -> {to}: {to} is not in LAYERS")),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports against the layering {LAYERS:?} (move the shared type down, or the code up):\n{}",
        bad.join("\n")
    );
}

/// Kahn's algorithm: the children that sit on a cycle, if any.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let nodes: BTreeSet<&String> = edges.keys().chain(edges.values().flatten()).collect();
    let mut indeg: BTreeMap<&String, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for tos in edges.values() {
        for t in tos {
            *indeg.entry(t).or_default() += 1;
        }
    }
    let mut ready: Vec<&String> = indeg
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(n, _)| *n)
        .collect();
    let mut seen = 0;
    while let Some(n) = ready.pop() {
        seen += 1;
        for t in edges.get(n).into_iter().flatten() {
            let d = indeg.get_mut(t).expect("node");
            *d -= 1;
            if *d == 0 {
                ready.push(t);
            }
        }
    }
    if seen == nodes.len() {
        return Vec::new();
    }
    indeg
        .into_iter()
        .filter(|(_, d)| *d > 0)
        .map(|(n, _)| n.clone())
        .collect()
}

#[test]
fn files_inside_a_module_do_not_import_each_other_in_a_cycle() {
    let g = graph();
    let mut bad = Vec::new();
    for (top, edges) in &g.inner {
        let c = cycle(edges);
        if !c.is_empty() {
            let detail: Vec<String> = c
                .iter()
                .map(|n| {
                    format!(
                        "{top}::{n} -> {:?}",
                        edges.get(n).cloned().unwrap_or_default()
                    )
                })
                .collect();
            bad.push(detail.join("\n"));
        }
    }
    assert!(bad.is_empty(), "import cycles:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_sees_edges() {
    // The check must not pass because it reads nothing.
    let g = graph();
    assert!(g.top["face"].contains("session"), "{:?}", g.top["face"]);
    assert!(g.top["probe"].contains("traffic"));
    assert!(g.inner["probe"]["sampler"].contains("queues"));
    assert_eq!(
        targets("use crate::{a, b::c};", "crate::"),
        ["a", "b"].iter().map(|s| s.to_string()).collect()
    );
}
