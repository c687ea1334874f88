//! No command line makes wirescope panic: random argument lists built from
//! the real flags and hostile values (huge, negative, empty, NaN, unit
//! soup), parsed and resolved exactly as `main` does, and non-UTF-8
//! arguments through the real binary.

use clap::Parser;
use proptest::prelude::*;
use wirescope::cli::{Cli, Command};

const FLAGS: &[&str] = &[
    "-t",
    "--time",
    "-i",
    "--interval",
    "-O",
    "--omit",
    "--history",
    "-P",
    "--streams",
    "--conns",
    "--threads",
    "--depth",
    "--size",
    "--resp-size",
    "-l",
    "--len",
    "-w",
    "--window",
    "-M",
    "--mss",
    "-C",
    "--congestion",
    "-n",
    "--bytes",
    "--sweep",
    "--cpus",
    "--peer-cpus",
    "-m",
    "--mode",
    "--engine",
    "--peer",
    "--pair-queues",
    "--iface",
    "--peer-iface",
    "--ebpf",
    "--fail-on",
    "--log",
    "--from",
    "--token-file",
    "--listen",
    "-R",
    "--reverse",
    "--bidir",
    "-Z",
    "--zerocopy",
    "--skip-rx-copy",
    "--json",
    "--local-pair",
];

const VALUES: &[&str] = &[
    "1e30",
    "1e300",
    "-1",
    "0",
    "0s",
    "NaN",
    "inf",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999y",
    "1ns",
    "10ms",
    "1s",
    "3",
    "64",
    "64K",
    "64M",
    "64G",
    "64T",
    "9999999999999999999999K",
    "size=1,2",
    "streams=0",
    "size=",
    "=",
    "0-99",
    "99-0",
    "0-3,8",
    "1,",
    "stream",
    "rr",
    "pingpong",
    "tcp",
    "warn",
    "off",
    "deep",
    "",
    "localhost:0",
    "[::1]:5310",
    "256.1.1.1",
    "/nonexistent/x",
    "-",
    "--",
    "a=b=c",
];

fn words() -> impl Strategy<Value = Vec<String>> {
    let word = prop_oneof![
        proptest::sample::select(FLAGS).prop_map(String::from),
        proptest::sample::select(VALUES).prop_map(String::from),
        "[ -~]{0,12}",
    ];
    proptest::collection::vec(word, 0..10)
}

fn sub() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(&["run", "tui", "watch", "check", "capture", "agent"][..])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn no_argument_list_panics(sub in sub(), rest in words()) {
        let mut argv = vec!["wirescope".to_string(), sub.to_string()];
        argv.extend(rest);
        if let Ok(cli) = Cli::try_parse_from(&argv) {
            match cli.command {
                // (Peer names are not resolved here: that would ask DNS.)
                Some(Command::Run(r)) => {
                    let _ = r.test.resolve();
                }
                Some(Command::Tui(t)) => {
                    let _ = t.test.resolve();
                }
                Some(Command::Watch(mut w)) => {
                    w.peer = None;
                    let _ = w.resolve();
                }
                _ => {}
            }
        }
    }
}

#[test]
fn huge_durations_are_usage_errors_not_panics() {
    for flag in ["-t", "-i", "-O", "--history"] {
        for v in ["1e30", "1e300", "99999999999999y"] {
            let r = Cli::try_parse_from(["wirescope", "run", flag, v]);
            let e = r
                .err()
                .unwrap_or_else(|| panic!("{flag} {v} accepted"))
                .to_string();
            assert!(
                e.contains(flag.trim_start_matches('-')) || e.contains(v),
                "{e}"
            );
        }
    }
}

#[test]
fn a_non_utf8_argument_is_a_usage_error_of_the_real_binary() {
    let _share = crate::common::traffic();
    use std::os::unix::ffi::OsStrExt;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["watch", "--iface"])
        .arg(std::ffi::OsStr::from_bytes(b"\xff\xfe"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("UTF-8") || err.contains("utf-8") || err.contains("invalid"),
        "{err}"
    );
}
