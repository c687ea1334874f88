//! The control view's fields: each edits the [`TestArgs`] that `wirescope run`
//! parses, so [`TestArgs::resolve`] stays the one source of truth for what
//! is a valid test. What a field means for the test's engine (its modes,
//! the option the count or size edits, its label) the engine says through
//! [`EngineForm`]; this module holds what every engine shares. Pure
//! functions; no I/O.

use crate::cli::TestArgs;
use crate::traffic::registry::form;
use crate::traffic::EngineKind;
use crate::traffic::{ladder, EngineForm, FormDirection, FormOptions};
use crate::units::Bytes;
use std::time::Duration;
/// One editable option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `--mode`.
    Mode,
    /// `--streams` (stream), `--conns` (rr/pingpong) or `--channels` (grpc).
    Count,
    /// grpc: `--concurrency` (RPCs in flight in all).
    Concurrency,
    /// `--len` (stream) or `--size` (rr/pingpong).
    Size,
    /// `--time`.
    Time,
    /// stream: normal, `--reverse` or `--bidir`.
    Direction,
}

/// Fields in display order.
pub const FIELDS: [Field; 6] = [
    Field::Mode,
    Field::Count,
    Field::Concurrency,
    Field::Size,
    Field::Time,
    Field::Direction,
];

const COUNTS: [u32; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024];
const SIZES: [u64; 11] = [
    64,
    512,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];
const TIMES: [u64; 9] = [3, 5, 10, 20, 30, 60, 120, 300, 600];

/// The test's engine, its part of the view, its mode and the options the
/// view edits.
struct Current {
    form: &'static dyn EngineForm,
    mode: &'static str,
    o: FormOptions,
}

fn current(t: &TestArgs) -> Current {
    let o = FormOptions {
        mode: t.mode.clone(),
        streams: t.streams,
        conns: t.conns,
        len: t.len,
        size: t.size,
        reverse: t.reverse,
        bidir: t.bidir,
        engines: t.engines.clone(),
    };
    let form = form(t.engine);
    Current {
        form,
        mode: form.mode(&o),
        o,
    }
}

/// Write what the view edits back into `t`.
fn put(t: &mut TestArgs, o: FormOptions) {
    t.mode = o.mode;
    t.streams = o.streams;
    t.conns = o.conns;
    t.len = o.len;
    t.size = o.size;
    t.reverse = o.reverse;
    t.bidir = o.bidir;
    t.engines = o.engines;
}

/// Every engine and mode, in the order the mode field cycles through them.
fn choices() -> Vec<(EngineKind, &'static str)> {
    EngineKind::ALL
        .into_iter()
        .flat_map(|k| form(k).modes().into_iter().map(move |m| (k, m)))
        .collect()
}

/// Label of a field for the current mode.
pub fn label(f: Field, t: &TestArgs) -> &'static str {
    let c = current(t);
    match f {
        Field::Mode => c.form.mode_label(),
        Field::Count => c.form.count_label(c.mode),
        // Under an engine without the field, the label of one that has it.
        Field::Concurrency => c
            .form
            .concurrency_label()
            .or_else(|| concurrency_forms().find_map(|f| f.concurrency_label()))
            .unwrap_or("in flight (--concurrency)"),
        Field::Size => c.form.size_label(c.mode),
        Field::Time => "duration (-t)",
        Field::Direction => c.form.direction_label(),
    }
}

/// The forms of the engines with a concurrency field.
fn concurrency_forms() -> impl Iterator<Item = &'static dyn EngineForm> {
    EngineKind::ALL
        .into_iter()
        .map(form)
        .filter(|f| f.concurrency_label().is_some())
}

/// What the concurrency field says under an engine without one: the
/// engines that have it (`n/a (grpc only)`).
fn concurrency_engines() -> String {
    let have: Vec<&str> = concurrency_forms().map(|f| f.kind().name()).collect();
    format!("n/a ({} only)", have.join(", "))
}

/// Value of a field as shown.
pub fn value(f: Field, t: &TestArgs) -> String {
    let c = current(t);
    match f {
        Field::Mode => c.form.mode_name(c.mode),
        Field::Count => c.form.count(&c.o, c.mode).to_string(),
        Field::Concurrency => c
            .form
            .concurrency(&c.o)
            .map_or_else(concurrency_engines, |n| n.to_string()),
        Field::Size if c.form.size_in_bytes() => format!("{} B", c.form.size(&c.o, c.mode).0),
        Field::Size => short_size(c.form.size(&c.o, c.mode)),
        Field::Time => match t.time {
            Some(d) => humantime::format_duration(d).to_string(),
            None if t.bytes.is_some() => "until --bytes".into(),
            None => "10s".into(),
        },
        Field::Direction => match c.form.directions(c.mode) {
            FormDirection::BothWays => "n/a (both ways)".into(),
            _ => direction(t).into(),
        },
    }
}

fn direction(t: &TestArgs) -> &'static str {
    match (t.reverse, t.bidir) {
        (true, _) => "reverse (peer sends)",
        (_, true) => "bidir",
        _ => "normal (this host sends)",
    }
}

/// Change field `f` by one step. Mode changes carry the count over and reset
/// what only the old mode accepts, so the result resolves when the old one did.
pub fn step(f: Field, t: &mut TestArgs, step: i32) {
    let Current { form, mode, mut o } = current(t);
    match f {
        Field::Mode => {
            let all = choices();
            let i = all.iter().position(|c| *c == (t.engine, mode)).unwrap_or(0) as i32;
            let next = all[(i + step).rem_euclid(all.len() as i32) as usize];
            let keep = Some(form.count(&o, mode)).filter(|n| *n > 1);
            set_mode(t, next, keep);
            return;
        }
        Field::Count => {
            let n = ladder(&COUNTS, form.count(&o, mode), step);
            form.set_count(&mut o, mode, n);
        }
        Field::Concurrency => form.step_concurrency(&mut o, step),
        Field::Size => {
            let steps = form.size_steps().unwrap_or(&SIZES);
            let s = Bytes(ladder(steps, form.size(&o, mode).0, step));
            form.set_size(&mut o, mode, s);
        }
        Field::Time => {
            let cur = t.time.map(|d| d.as_secs()).unwrap_or(10);
            t.time = Some(Duration::from_secs(ladder(&TIMES, cur, step)));
            return;
        }
        Field::Direction => match form.directions(mode) {
            FormDirection::BothWays => {}
            FormDirection::Reverse => o.reverse = !o.reverse,
            FormDirection::Bidir => o.bidir = !o.bidir,
            FormDirection::ReverseOrBidir => {
                let (r, b) = match (o.reverse, o.bidir, step > 0) {
                    (false, false, true) | (false, true, false) => (true, false),
                    (true, _, true) | (false, false, false) => (false, true),
                    _ => (false, false),
                };
                o.reverse = r;
                o.bidir = b;
            }
        },
    }
    put(t, o);
}

/// Switch to engine and mode `next`, resetting every option only a test
/// accepts (the engines' hardware names stay) and carrying the count over.
fn set_mode(t: &mut TestArgs, next: (EngineKind, &'static str), keep: Option<u32>) {
    t.threads = None;
    t.depth = 1;
    t.resp_size = None;
    t.zerocopy = false;
    t.skip_rx_copy = false;
    t.bytes = None;
    t.window = None;
    t.mss = None;
    t.congestion = None;
    let mut o = FormOptions {
        engines: t.engines.for_next_test(),
        ..FormOptions::default()
    };
    let (engine, mode) = next;
    form(engine).select(&mut o, mode, keep);
    t.engine = engine;
    put(t, o);
}

/// The `wirescope run` command line that runs the same test.
pub fn command_line(t: &TestArgs) -> String {
    let c = current(t);
    let mut v = vec!["wirescope run".to_string()];
    v.extend(c.form.command_mode(c.mode));
    for k in EngineKind::ALL {
        v.extend(form(k).command_flags(&t.engines));
    }
    v.extend(
        [
            t.streams.map(|n| format!("-P {n}")),
            t.conns.map(|n| format!("--conns {n}")),
            t.len.map(|n| format!("-l {}", short_size(n))),
            t.size.map(|n| format!("--size {}", short_size(n))),
            t.reverse.then(|| "-R".into()),
            t.bidir.then(|| "--bidir".into()),
            t.time
                .map(|d| format!("-t {}", humantime::format_duration(d))),
        ]
        .into_iter()
        .flatten(),
    );
    v.join(" ")
}

fn short_size(b: Bytes) -> String {
    match b.0 {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// The test options `wirescope run ARGS` parses.
    fn parsed(args: &str) -> TestArgs {
        let argv = std::iter::once("wirescope").chain(args.split_whitespace());
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Some(Command::Run(r))) => r.test,
            other => panic!("{args}: {other:?}"),
        }
    }

    #[test]
    fn every_engine_and_mode_is_reached_resolves_and_prints_the_same_test() {
        let all = choices();
        assert_eq!(all.len(), 10, "{all:?}");
        let mut t = parsed("run -P 4");
        let mut carried = 4;
        for want in all.iter().skip(1).chain(all.first()) {
            step(Field::Mode, &mut t, 1);
            let c = current(&t);
            assert_eq!((t.engine, c.mode), *want);
            // The count carries over (RDMA latency runs on one QP, and
            // nothing is carried from there).
            let count = c.form.count(&c.o, c.mode);
            carried = if c.mode == "lat" { 1 } else { carried };
            assert_eq!(count, carried, "{want:?}");
            let spec = t.resolve().map(|p| p.spec).map_err(|e| e.0);
            assert!(spec.is_ok(), "{want:?}: {spec:?}");
            let line = command_line(&t);
            let again = parsed(line.trim_start_matches("wirescope "));
            assert_eq!(
                again.resolve().map(|p| p.spec).map_err(|e| e.0),
                spec,
                "{line}"
            );
        }
        assert_eq!((t.engine, current(&t).mode), (EngineKind::Tcp, "stream"));
    }
}
