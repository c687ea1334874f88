//! Two habits of `src/` that a reader relies on, kept by parsing every file
//! with syn:
//!
//! * no function longer than [`MAX_FN_LINES`] lines, from `fn` to its closing
//!   brace, test code included: a longer one is split by phase, not by line
//!   count;
//! * no `Result<_, String>` outside test code (`#[cfg(test)]` items and the
//!   files they declare): an error is a type (thiserror) that names what went
//!   wrong, so a caller can match on it and a message is written once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest a function in `src/` may be, in lines.
const MAX_FN_LINES: usize = 100;

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// The files `file` declares as `#[cfg(test)] mod name;`.
fn test_children(path: &Path, file: &syn::File) -> Vec<PathBuf> {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let parent = path.parent().expect("file has a folder");
    let dir = if matches!(stem, "mod" | "lib" | "main") {
        parent.to_path_buf()
    } else {
        parent.join(stem)
    };
    let mut out = Vec::new();
    for item in &file.items {
        if let syn::Item::Mod(m) = item {
            if m.content.is_none() && is_cfg_test(&m.attrs) {
                let name = m.ident.to_string();
                out.push(dir.join(format!("{name}.rs")));
                out.push(dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// What one file breaks: long functions (anywhere) and `Result<_, String>`
/// types (outside test code).
#[derive(Default)]
struct Shape {
    in_test: bool,
    long: Vec<(usize, String, usize)>,
    string_errors: Vec<usize>,
}

impl Shape {
    fn function(&mut self, name: &syn::Ident, sig: &syn::Signature, body: &syn::Block) {
        let first = sig.fn_token.span.start().line;
        let last = body.brace_token.span.close().end().line;
        let lines = last + 1 - first;
        if lines > MAX_FN_LINES {
            self.long.push((first, name.to_string(), lines));
        }
    }

    /// Visits `walk` as test code when `attrs` say `#[cfg(test)]`.
    fn within(&mut self, attrs: &[syn::Attribute], walk: impl FnOnce(&mut Self)) {
        let was = self.in_test;
        self.in_test |= is_cfg_test(attrs);
        walk(self);
        self.in_test = was;
    }
}

impl<'a> Visit<'a> for Shape {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        self.within(&m.attrs, |s| syn::visit::visit_item_mod(s, m));
    }
    fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
        self.within(&i.attrs, |s| syn::visit::visit_item_impl(s, i));
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.function(&f.sig.ident, &f.sig, &f.block);
        self.within(&f.attrs, |s| syn::visit::visit_item_fn(s, f));
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.function(&f.sig.ident, &f.sig, &f.block);
        self.within(&f.attrs, |s| syn::visit::visit_impl_item_fn(s, f));
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.function(&f.sig.ident, &f.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
    fn visit_type_path(&mut self, t: &'a syn::TypePath) {
        let result = t.path.segments.last().filter(|s| s.ident == "Result");
        if let Some(syn::PathArguments::AngleBracketed(args)) = result.map(|s| &s.arguments) {
            if let Some(syn::GenericArgument::Type(syn::Type::Path(e))) = args.args.iter().nth(1) {
                if e.path.is_ident("String") && !self.in_test {
                    self.string_errors.push(t.span().start().line);
                }
            }
        }
        syn::visit::visit_type_path(self, t);
    }
}

#[test]
fn functions_are_short_and_errors_are_types() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = crate::common::src_files();
    let parsed: Vec<(PathBuf, syn::File)> = files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read source");
            let file = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{}: syn cannot parse it: {e}", p.display()));
            (p, file)
        })
        .collect();
    let tests: BTreeSet<PathBuf> = parsed
        .iter()
        .flat_map(|(p, f)| test_children(p, f))
        .collect();
    let (mut long, mut string_errors) = (Vec::new(), Vec::new());
    for (path, file) in &parsed {
        let mut shape = Shape {
            in_test: tests.contains(path),
            ..Shape::default()
        };
        shape.visit_file(file);
        let name = path.strip_prefix(&src).unwrap_or(path).display();
        long.extend(
            shape
                .long
                .iter()
                .map(|(line, f, n)| format!("{name}:{line} fn {f}: {n} lines")),
        );
        string_errors.extend(
            shape
                .string_errors
                .iter()
                .map(|line| format!("{name}:{line}")),
        );
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split each by phase):\n{}",
        long.join("\n")
    );
    assert!(
        string_errors.is_empty(),
        "Result<_, String> outside test code in src/ (give the error a thiserror type that names what went wrong):\n{}",
        string_errors.join("\n")
    );
}
