//! The letters users of perftest, iperf3 and ghz type by habit.
//!
//! Where wirescope's own short option would take such a letter and silently
//! mean something else (perftest's `-t` is the tx depth, wirescope's is the
//! test length), or where the letter is not wirescope's at all, the command
//! is refused before it runs, with the long form that does what the user
//! meant. Letters that mean the same thing (iperf3's `-p`, `-P`, `-R`, `-t`
//! outside RDMA) are left alone. The decisions are listed in
//! docs/options.md ("Habits of other tools").
//!
//! The tables are each engine's ([`crate::traffic::EngineSlice::habits`]:
//! perftest's letters are RDMA's, ghz's gRPC's, iperf3's `-u` the packet
//! sink's); this file keeps the ones that belong to no engine.
//!
//! This reads the raw arguments, because clap does not say whether an
//! option was given by its short or its long name.

use super::UsageError;
use crate::traffic::habits::{Habit, LongHabit};
use crate::traffic::{slice, EngineKind};

/// iperf3's letters wirescope does not have, under any engine. Each engine adds its own (`EngineSlice::habits`).
const HABITS: &[Habit] = &[
    Habit {
        letter: 'c',
        anywhere: true,
        tool: "iperf3",
        meaning: "the server to connect to",
        instead: "--peer HOST (run `wirescope agent` there)",
    },
    Habit {
        letter: 'J',
        anywhere: true,
        tool: "iperf3",
        meaning: "JSON output",
        instead: "--json (the summary as JSON) or --log - (JSON lines as they happen, like iperf3's --json-stream)",
    },
];

/// Long options of the same tools that wirescope does not have (each engine adds its own).
const LONG_HABITS: &[LongHabit] = &[
    LongHabit {
        name: "json-stream",
        what: "iperf3's JSON lines",
        instead: "--log -",
    },
    LongHabit {
        name: "client",
        what: "iperf3's server to connect to",
        instead: "--peer HOST",
    },
];

/// The subcommands whose options are a test's.
const TEST_COMMANDS: &[&str] = &["run", "tui"];

/// Refuses a habit letter of another tool that wirescope would misread or
/// does not have, naming the long form to use. `argv[0]` is the program.
pub fn check(argv: &[String]) -> Result<(), UsageError> {
    let args = argv.get(1..).unwrap_or_default();
    let Some(cmd_at) = args.iter().position(|a| !a.starts_with('-')) else {
        return Ok(());
    };
    let cmd = args[cmd_at].as_str();
    if !TEST_COMMANDS.contains(&cmd) {
        return Ok(());
    }
    let args: Vec<&str> = args[cmd_at + 1..]
        .iter()
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .collect();
    let engine = engine_of(&args);
    let kind = <EngineKind as clap::ValueEnum>::from_str(engine, false).ok();
    let engines = || EngineKind::ALL.into_iter().map(slice);
    // The test's engine's own letters first (ghz's -c under grpc), then
    // the ones refused under any engine (iperf3's -c).
    let own = kind.map(|k| slice(k).habits()).unwrap_or_default();
    let letters_refused: Vec<&Habit> = own
        .iter()
        .filter(|h| !h.anywhere)
        .chain(HABITS)
        .chain(engines().flat_map(|s| s.habits()).filter(|h| h.anywhere))
        .collect();
    let longs_refused: Vec<&LongHabit> = LONG_HABITS
        .iter()
        .chain(engines().flat_map(|s| s.long_habits()))
        .collect();
    let value_shorts = value_shorts(cmd);
    for a in &args {
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            if let Some(h) = longs_refused.iter().find(|h| h.name == name) {
                return Err(UsageError(format!(
                    "--{name} is {}; wirescope has no such option: use {}",
                    h.what, h.instead
                )));
            }
            continue;
        }
        for letter in letters(a, &value_shorts) {
            if let Some(h) = letters_refused.iter().find(|h| h.letter == letter) {
                let under = if h.anywhere {
                    String::new()
                } else {
                    format!(" under --engine {engine}")
                };
                return Err(UsageError(format!(
                    "-{letter}{under} would be {}'s {}; wirescope does not take it: use {}",
                    h.tool, h.meaning, h.instead
                )));
            }
        }
    }
    Ok(())
}

/// The `--engine` given (the last one wins, as in clap), else the default.
fn engine_of<'a>(args: &[&'a str]) -> &'a str {
    let mut engine = EngineKind::DEFAULT.name();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--engine=") {
            engine = v;
        } else if *a == "--engine" {
            if let Some(v) = it.next() {
                engine = v;
            }
        }
    }
    engine
}

/// wirescope's own short options of subcommand `cmd` that take a value,
/// as its clap definition says: the rest of a cluster after one of them is
/// its value, not more letters.
fn value_shorts(cmd: &str) -> Vec<char> {
    let top = <super::Cli as clap::CommandFactory>::command();
    let shorts = top
        .get_subcommands()
        .find(|c| c.get_name() == cmd)
        .into_iter()
        .flat_map(|c| c.get_arguments())
        .filter(|a| a.get_action().takes_values())
        .filter_map(|a| a.get_short())
        .collect();
    shorts
}

/// The option letters of one short-option argument (`-RZ` → R, Z; `-t5` →
/// t): none for a value such as `-1` or a lone `-`. `value_shorts`: the
/// letters that take a value.
fn letters(arg: &str, value_shorts: &[char]) -> Vec<char> {
    let Some(cluster) = arg.strip_prefix('-') else {
        return Vec::new();
    };
    if cluster.starts_with('-') || !cluster.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for c in cluster.chars() {
        if !c.is_ascii_alphabetic() {
            break;
        }
        out.push(c);
        if value_shorts.contains(&c) {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        std::iter::once("wirescope")
            .chain(s.split_whitespace())
            .map(String::from)
            .collect()
    }

    fn refused(s: &str) -> String {
        match check(&argv(s)) {
            Err(e) => e.0,
            Ok(()) => panic!("`{s}` was accepted"),
        }
    }

    #[test]
    fn perftest_letters_under_rdma_are_refused_with_the_long_form() {
        for (cmd, long) in [
            ("-t 128", "--tx-depth"),
            ("-n 5000", "--iters"),
            ("-i 1", "--ib-port"),
            ("-s 65536", "--size"),
            ("-q 4", "--qps"),
            ("-a", "--sweep size=all"),
            ("-d mlx5_0", "--ib-dev"),
            ("-x 3", "--gid-index"),
            ("-F", "drop -F"),
            ("-D 10", "--time"),
        ] {
            let e = refused(&format!("run --engine rdma --peer h {cmd}"));
            assert!(e.contains(long), "{cmd}: {e}");
            assert!(e.contains("perftest") && e.contains("--engine rdma"), "{e}");
        }
        // Glued values and the engine given after the letter.
        assert!(refused("run -t128 --engine=rdma").contains("--tx-depth"));
        // A cluster of flags: the perftest letter inside it is found.
        assert!(refused("tui --engine rdma -Fa").contains("perftest"));
    }

    #[test]
    fn the_same_letters_keep_their_meaning_under_other_engines() {
        for ok in [
            "run -t 5s",
            "run --engine tcp -n 1G -i 500ms",
            "run --engine sink -t 2s -i 1s",
            "run --engine rdma --time 5s --tx-depth 128 --iters 5000",
            "run --engine rdma -m lat -P 2",
            "agent -p 5310",
            "profile save -o x.toml",
            "run --peer h -- -t",
        ] {
            assert!(check(&argv(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn iperf3_and_ghz_habits_name_what_to_write() {
        assert!(refused("run -c host").contains("--peer HOST"));
        assert!(refused("run -u -b 10G").contains("--engine sink"));
        assert!(refused("run -J").contains("--log -"));
        assert!(refused("run --json-stream").contains("--log -"));
        // wirescope's own --json is not a habit.
        assert!(check(&argv("run --json")).is_ok());
        assert!(refused("run --engine grpc -n 100000").contains("ghz"));
        assert!(refused("run --engine grpc -c 50").contains("--concurrency"));
        assert!(refused("run --engine grpc --rps 1000").contains("closed-loop"));
        // -n outside grpc and rdma is wirescope's byte count.
        assert!(check(&argv("run -n 1G")).is_ok());
    }

    #[test]
    fn values_that_look_like_options_are_not_letters() {
        let v = value_shorts("run");
        assert!(
            v.contains(&'t') && v.contains(&'P') && !v.contains(&'R'),
            "{v:?}"
        );
        assert_eq!(letters("-1", &v), Vec::<char>::new());
        assert_eq!(letters("-", &v), Vec::<char>::new());
        assert_eq!(letters("-t5s", &v), vec!['t']);
        assert_eq!(letters("-RZ", &v), vec!['R', 'Z']);
    }
}
