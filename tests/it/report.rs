//! `wirescope report` and `wirescope compare` on logs: real runs of every
//! engine this machine has (TCP stream and rr, gRPC, the packet sink, a
//! sweep) drawn into one self-contained page each, opened in a real
//! headless browser (Debian's chromium) whose screenshot must show every
//! chart; the fixture log's charts keep their structure (insta); compare
//! says what changed between two runs.

use crate::common;

use common::{require_root, stderr, Pair};
use std::path::{Path, PathBuf};
use std::process::Command;

fn wirescope(args: &[&str]) -> std::process::Output {
    Command::new(common::bin()).args(args).output().unwrap()
}

fn report(logs: &[&Path], out: &Path) -> String {
    let mut args = vec!["report".to_string()];
    args.extend(logs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".to_string(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = wirescope(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read_to_string(out).unwrap()
}

/// The page fetches nothing: no src/href/url(), no script, no link; the
/// only URL is the SVG namespace name, which is never fetched.
fn assert_self_contained(html: &str) {
    let lower = html.to_lowercase();
    for bad in [
        "src=", "href=", "url(", "@import", "<script", "<link", "<img", "<iframe",
    ] {
        assert!(
            !lower.contains(bad),
            "the report refers outside itself: {bad}"
        );
    }
    let urls = lower.matches("http").count();
    let namespaces = lower
        .matches("xmlns=\"http://www.w3.org/2000/svg\"")
        .count();
    assert_eq!(urls, namespaces, "a URL other than the SVG namespace");
}

/// Every chart: `(title, height, svg)`, in page order.
fn charts(html: &str) -> Vec<(String, u32, String)> {
    html.split("<svg ")
        .skip(1)
        .map(|rest| {
            let svg = format!("<svg {}", &rest[..rest.find("</svg>").unwrap() + 6]);
            let title = svg
                .split("<title>")
                .nth(1)
                .and_then(|t| t.split("</title>").next())
                .unwrap_or_else(|| panic!("a chart without <title>: {}", &svg[..200]))
                .to_string();
            let height: u32 = svg
                .split("height=\"")
                .nth(1)
                .and_then(|h| h.split('"').next())
                .and_then(|h| h.parse().ok())
                .unwrap();
            (title, height, svg)
        })
        .collect()
}

/// A screenshot of `html` in headless chromium, decoded: (width, height, RGBA).
fn screenshot(dir: &Path, name: &str, html: &str, height: u32) -> (u32, u32, Vec<u8>) {
    let page = dir.join(format!("{name}.html"));
    let png = dir.join(format!("{name}.png"));
    std::fs::write(&page, html).unwrap();
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            &format!("--screenshot={}", png.display()),
            &format!("--window-size=1000,{height}"),
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium (Debian package `chromium`) renders the report; install it as the README says");
    assert!(
        o.status.success() && png.exists(),
        "chromium: {}",
        stderr(&o)
    );
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let rgba: Vec<u8> = match info.color_type {
        png::ColorType::Rgba => buf[..info.buffer_size()].to_vec(),
        png::ColorType::Rgb => buf[..info.buffer_size()]
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    (info.width, info.height, rgba)
}

/// Each chart of the report alone at a known place on a white page; the
/// browser's picture of each place must be drawn (not blank) and hold
/// colour (a line, bars or a heat map, not only axes).
fn assert_charts_drawn(dir: &Path, name: &str, html: &str) {
    let charts = charts(html);
    assert!(!charts.is_empty(), "{name}: no chart");
    let mut page = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{margin:0;background:#fff}\
         div{position:absolute;left:0}svg{display:block}</style></head><body>",
    );
    let mut top = 0;
    let mut places = Vec::new();
    for (title, h, svg) in &charts {
        page.push_str(&format!("<div style=\"top:{top}px\">{svg}</div>"));
        places.push((title.clone(), top, *h));
        top += h + 20;
    }
    page.push_str("</body></html>");
    let (w, h, px) = screenshot(dir, name, &page, top);
    for (title, y0, ch) in places {
        let (mut drawn, mut coloured, mut all) = (0u64, 0u64, 0u64);
        for y in y0..(y0 + ch).min(h) {
            for x in 0..w.min(1000) {
                let i = ((y * w + x) * 4) as usize;
                let (r, g, b) = (px[i], px[i + 1], px[i + 2]);
                all += 1;
                if r < 240 || g < 240 || b < 240 {
                    drawn += 1;
                }
                if r.max(g).max(b) - r.min(g).min(b) > 60 {
                    coloured += 1;
                }
            }
        }
        assert!(
            drawn * 100 > all,
            "{name}: {title:?} is blank in the browser ({drawn}/{all} drawn)"
        );
        assert!(
            coloured > 20,
            "{name}: {title:?} shows no data in the browser ({coloured} coloured pixels)"
        );
    }
}

#[test]
fn reports_of_every_engine_and_a_sweep_show_every_chart_in_a_browser() {
    let _traffic = crate::common::traffic();
    require_root();
    let mut pair = Pair::new();
    pair.start_agent();
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("tcp", &["-P", "2"]),
        ("rr", &["-m", "rr"]),
        ("grpc", &["--engine", "grpc", "--channels", "2"]),
        (
            "sink",
            &["--engine", "sink", "--sink", "udp", "--rate", "50000"],
        ),
        ("sweep", &["--sweep", "size=1K,64K"]),
    ];
    let mut logs = Vec::new();
    for (name, extra) in cases {
        let log = dir.path().join(format!("{name}.jsonl"));
        let t = if *name == "sweep" { "1s" } else { "2s" };
        let mut args = vec!["-t", t, "--log", log.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = pair.run(&args);
        assert!(
            o.status.success(),
            "{name}: {}\nagent: {}",
            stderr(&o),
            pair.agent_log()
        );
        logs.push(log);
    }
    for (log, (name, _)) in logs.iter().zip(cases) {
        let html = report(&[log], &dir.path().join(format!("{name}.html")));
        assert_self_contained(&html);
        assert!(
            html.contains("class=\"limit\""),
            "{name}: no limited_by sentence"
        );
        let titles: Vec<String> = charts(&html).into_iter().map(|c| c.0).collect();
        assert!(
            titles.iter().any(|t| t.contains("CPU per core")),
            "{name}: {titles:?}"
        );
        let rate = if matches!(*name, "tcp" | "sweep") {
            "throughput"
        } else {
            "rate per interval"
        };
        assert!(
            titles.iter().any(|t| t.contains(rate)),
            "{name}: {titles:?}"
        );
        if matches!(*name, "rr" | "grpc") {
            assert!(
                titles.iter().any(|t| t.contains("latency")),
                "{name}: {titles:?}"
            );
        }
        if *name == "sweep" {
            assert!(
                titles.iter().any(|t| t.contains("vs size")),
                "{name}: {titles:?}"
            );
        }
        assert_charts_drawn(dir.path(), name, &html);
    }
    // Two logs side by side: one table and both columns.
    let both = report(&[&logs[0], &logs[4]], &dir.path().join("both.html"));
    assert!(both.contains("Side by side"));
    assert!(both.contains("repeat(2,"));
}

#[test]
fn the_fixture_logs_charts_keep_their_structure() {
    let _traffic = crate::common::traffic();
    let dir = tempfile::tempdir().unwrap();
    let html = report(
        &[Path::new("tests/fixtures/tui/run.jsonl")],
        &dir.path().join("r.html"),
    );
    assert_self_contained(&html);
    let shape: Vec<String> = charts(&html)
        .iter()
        .map(|(title, h, svg)| {
            let count = |tag: &str| svg.matches(&format!("<{tag} ")).count();
            format!(
                "{title} | height {h} | text {} rect {} line {} polyline {} circle {}",
                count("text"),
                count("rect"),
                count("line"),
                count("polyline"),
                count("circle")
            )
        })
        .collect();
    insta::assert_snapshot!(shape.join("\n"));
    // Units on every axis and the point's sentence.
    assert!(
        html.contains(">\nGbit/s\n<") || html.contains(">Gbit/s<"),
        "no unit on the y axis"
    );
    assert!(html.contains("time (s)"));
}

fn edited(src: &str, f: impl Fn(&mut serde_json::Value)) -> String {
    src.lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            f(&mut v);
            v.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn compare_says_what_changed_and_whether_it_is_beyond_the_spread() {
    let _traffic = crate::common::traffic();
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string("tests/fixtures/tui/run.jsonl").unwrap();
    let a = dir.path().join("a.jsonl");
    std::fs::write(&a, &src).unwrap();
    // B: half the throughput, GRO on, and no GRO finding.
    let b = dir.path().join("b.jsonl");
    let text = edited(&src, |v| match v["type"].as_str() {
        Some("sample") => {
            for k in ["tx_bps", "rx_bps"] {
                let x = v["engine"][k].as_f64().unwrap();
                v["engine"][k] = serde_json::json!(x / 2.0);
            }
            if let Some(nics) = v.pointer_mut("/facts/nics") {
                for n in nics.as_array_mut().unwrap() {
                    if let Some(f) = n.pointer_mut("/features/value/generic-receive-offload") {
                        *f = serde_json::json!({"on": true, "fixed": false});
                    }
                }
            }
        }
        Some("summary") => {
            let x = v["throughput_bps"].as_f64().unwrap();
            v["throughput_bps"] = serde_json::json!(x / 2.0);
            v["findings"] = serde_json::json!([]);
        }
        _ => {}
    });
    std::fs::write(&b, text).unwrap();
    let o = wirescope(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &c["points"][0];
    assert!(
        (p["change_pct"].as_f64().unwrap() + 50.0).abs() < 0.5,
        "{p}"
    );
    assert_eq!(p["significant"], true, "{p}");
    assert!(
        c["cleared"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("nic.gro-off")),
        "{c}"
    );
    assert!(
        c["facts"].as_array().unwrap().iter().any(|f| f["key"]
            .as_str()
            .unwrap()
            .contains("generic-receive-offload.on")
            && f["a"] == "false"
            && f["b"] == "true"),
        "{c}"
    );
    // Same run twice: no change, nothing appeared, no fact differs.
    let o = wirescope(&["compare", a.to_str().unwrap(), a.to_str().unwrap()]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("+0.0 % (within the spread)"), "{t}");
    assert!(t.contains("facts that differ: none"), "{t}");
}

#[test]
fn bad_logs_and_paths_are_refused_and_nothing_is_half_written() {
    let _traffic = crate::common::traffic();
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, "this is not a log\n").unwrap();
    let out: PathBuf = dir.path().join("r.html");
    let o = wirescope(&[
        "report",
        junk.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("junk.jsonl"), "{}", stderr(&o));
    assert!(!out.exists());
    let o = wirescope(&[
        "report",
        "tests/fixtures/tui/run.jsonl",
        "-o",
        "/nonexistent/dir/r.html",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("-o"), "{}", stderr(&o));
}
