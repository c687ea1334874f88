//! Hostile input never panics and never allocates without bound (issue 14):
//! the control-frame decoders (plain handshake frames and sealed frames),
//! the capture parsers (every parser, ours and procfs-core's, through the
//! same reader `watch --from` uses, on real captures mutated byte by byte)
//! and the log reader. A
//! bounded number of proptest cases runs in CI with the other tests.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use wirescope::probe::capture_dir::CaptureDir;
use wirescope::probe::snapshot::snapshot;
use wirescope::probe::system::{default_route_iface, read_host_facts, uptime_secs};
use wirescope::record::log::read_log;
use wirescope::session::auth::Token;
use wirescope::session::channel::{read_sealed, Direction, SessionKeys};
use wirescope::session::proto::{read_msg_max, MAX_HANDSHAKE_FRAME};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// A length prefix followed by a JSON-ish body: mostly plausible frames, so
/// the decoder gets past the length check and into the message parser.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let json = prop_oneof![
        Just(r#"{"type":"hello","version":3}"#.to_string()),
        Just(r#"{"type":"start","test":{"id":1,"spec":{"engine":"tcp"}}}"#.to_string()),
        "\\PC{0,300}",
        "[{}\\[\\]\":,0-9a-z]{0,300}",
    ];
    (
        json,
        any::<bool>(),
        any::<u32>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(body, honest_len, len, tail)| {
            let body = body.into_bytes();
            let l = if honest_len { body.len() as u32 } else { len };
            let mut v = l.to_be_bytes().to_vec();
            v.extend_from_slice(&body);
            v.extend_from_slice(&tail);
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn handshake_frames_never_panic(bytes in frame()) {
        let mut r = bytes.as_slice();
        // Ok or a clear error; a length above the handshake bound is refused
        // before anything is allocated for it.
        let _ = block_on(read_msg_max(&mut r, MAX_HANDSHAKE_FRAME));
    }

    #[test]
    fn random_bytes_are_not_control_frames(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut r = bytes.as_slice();
        let _ = block_on(read_msg_max(&mut r, MAX_HANDSHAKE_FRAME));
    }

    #[test]
    fn forged_sealed_frames_never_open(bytes in frame()) {
        let token = Token::from_text("fuzz-token-0123456789abcdef-0123456789", "fuzz").unwrap();
        let keys = SessionKeys::derive(&token, b"agent-nonce", b"controller-nonce", &[7; 32]);
        let mut opener = keys.opener(Direction::ToAgent);
        let mut r = bytes.as_slice();
        // Without the key no byte string opens: every case is an error.
        prop_assert!(block_on(read_sealed(&mut r, &mut opener)).is_err());
    }
}

fn copy_tree(from: &Path, to: &Path, files: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&e.path(), &dst, files);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            files.push(dst);
        }
    }
}

/// The real captures in tests/fixtures plus the /proc fixtures, in one tree.
fn capture_base(root: &Path) -> Vec<PathBuf> {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    copy_tree(&fx.join("diagnose/inbox-2015"), root, &mut files);
    let proc_dir = root.join("proc");
    std::fs::create_dir_all(proc_dir.join("net")).unwrap();
    for (src, dst) in [
        ("interrupts", "interrupts"),
        ("softirqs", "softirqs"),
        ("stat-a", "stat"),
        ("net-dev", "net/dev"),
        ("net-snmp", "net/snmp"),
        ("net-netstat", "net/netstat"),
        ("softnet_stat", "net/softnet_stat"),
        ("net-route", "net/route"),
        ("uptime", "uptime"),
    ] {
        let to = proc_dir.join(dst);
        std::fs::copy(fx.join("proc").join(src), &to).unwrap();
        files.push(to);
    }
    files.sort();
    files
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Replace(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (
            any::<usize>(),
            prop_oneof![
                Just(b"18446744073709551616".to_vec()),
                Just(b"-1".to_vec()),
                Just(b"\n\n:\t".to_vec()),
                Just(b"NaN".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..32),
            ]
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        proptest::collection::vec(any::<u8>(), 0..256).prop_map(Mutation::Replace),
    ]
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
    match m {
        Mutation::Truncate(i) => {
            let n = at(*i, text.len());
            text.truncate(n);
        }
        Mutation::Flip(i, b) => {
            if !text.is_empty() {
                let n = i % text.len();
                text[n] ^= b | 1;
            }
        }
        Mutation::Insert(i, v) => {
            let n = at(*i, text.len());
            text.splice(n..n, v.iter().copied());
        }
        Mutation::Replace(v) => *text = v.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_captures_read_without_panic(
        muts in proptest::collection::vec((any::<usize>(), mutation()), 1..8)
    ) {
        let d = tempfile::tempdir().unwrap();
        let files = capture_base(d.path());
        for (which, m) in &muts {
            let f = &files[which % files.len()];
            let mut text = std::fs::read(f).unwrap();
            apply(&mut text, m);
            std::fs::write(f, &text).unwrap();
        }
        let dir = CaptureDir::new(d.path());
        let facts = read_host_facts(&dir, &["eth0".to_string()]);
        // Whatever was read stays within what the files could say.
        prop_assert!(facts.cpus < 1 << 20);
        // The files procfs-core parses (net/dev, route, uptime) too.
        let snap = snapshot(&dir, &[]);
        prop_assert!(snap.ifaces.len() < 1 << 20);
        let _ = default_route_iface(&dir);
        if let Some(up) = uptime_secs(&dir) {
            prop_assert!(up.is_finite() && up >= 0.0);
        }
    }

    #[test]
    fn hostile_logs_are_errors_not_panics(
        lines in proptest::collection::vec(
            prop_oneof![
                Just(r#"{"type":"event","t":1.0,"kind":"k","message":"m"}"#.to_string()),
                Just(r#"{"type":"sample","t":1e308}"#.to_string()),
                Just(r#"{"type":"summary"}"#.to_string()),
                Just("[".repeat(200)),
                "\\PC{0,200}",
            ],
            0..12,
        ),
        newline_at_end in any::<bool>(),
    ) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fuzz.jsonl");
        let mut text = lines.join("\n");
        if newline_at_end {
            text.push('\n');
        }
        std::fs::write(&p, text).unwrap();
        let _ = read_log(&p);
    }
}
