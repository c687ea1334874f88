//! `cargo xtask bench grpc`: wirescope's gRPC client and server next to ghz
//! and grpc-go's benchmark server, on loopback and on the namespace pair.
//!
//! Four pairings of unary 64 B, 8 connections x 256 in flight, alternating
//! within each round: wirescope -> wirescope, ghz -> grpc-go, wirescope ->
//! grpc-go, ghz -> wirescope; then wirescope's streaming (ping-pong)
//! messages/s to both servers; then one 4 MiB unary point per stack with
//! the peak resident memory of each client and server.
//!
//! The wirescope side is `wirescope serve grpc` (the server alone, as the
//! agent runs it) and `wirescope run --engine grpc --target` (the client as
//! every test runs it: the same driver, pipeline and summary, only this
//! host sampled, `--ebpf off`). A client's peak memory is its `ru_maxrss`
//! (wait4: the whole `run` process); a server's is `VmHWM`, reset through
//! `/proc/PID/clear_refs` before each run. Results are printed, never asserted.

mod refs;

use super::stats::{list, median, ratio};
use super::{table, Common, SETTLE};
use crate::cmd::{self, Server};
use crate::netns::{NetnsPair, Side, ADDR_B};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WS_PORT: u16 = 50061;
const GO_PORT: u16 = 50062;
const CHANNELS: &str = "8";
const CONCURRENCY: &str = "256";
const SMALL: usize = 64;
/// 4 MiB less room for the fields around the payload, so the whole message
/// fits grpc-go's default 4 MiB receive limit.
const LARGE: usize = (4 << 20) - 32;

/// Where the tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Net {
    /// Two namespaces joined by a 4-queue veth (198.18.0.1 -> 198.18.0.2).
    Veth,
    /// 127.0.0.1 in this namespace.
    Loopback,
    /// Both, veth first.
    Both,
}

/// `bench grpc` options.
#[derive(Debug, Args)]
pub struct GrpcArgs {
    #[command(flatten)]
    common: Common,
    /// Where to run.
    #[arg(long, value_enum, default_value = "both")]
    net: Net,
    /// Skip the 4 MiB memory point (ghz needs gigabytes for it).
    #[arg(long)]
    no_large: bool,
}

/// Run the benchmark.
pub fn run(wirescope: &Path, args: &GrpcArgs) -> Result<()> {
    let dir = crate::target_dir().join("xtask-bench");
    let refs = refs::ensure(&dir.join("go"))?;
    let small = request_file(&dir, SMALL)?;
    let large = request_file(&dir, LARGE)?;
    let nets = match args.net {
        Net::Both => vec![Net::Veth, Net::Loopback],
        n => vec![n],
    };
    let tools = Tools {
        wirescope: wirescope.to_path_buf(),
        refs,
        small,
        large,
        log_dir: dir,
    };
    let mut reports = Vec::new();
    for net in nets {
        let mut place = Place::start(net, &tools)?;
        let unary = unary_rounds(&place, &tools, args.common)?;
        let large = if args.no_large {
            None
        } else {
            Some(large_point(&mut place, &tools, args.common.time)?)
        };
        reports.push((place.describe(), unary, large));
    }
    for (what, unary, large) in &reports {
        print_report(what, args.common, unary, large.as_ref());
    }
    Ok(())
}

struct Tools {
    wirescope: PathBuf,
    refs: refs::Refs,
    small: PathBuf,
    large: PathBuf,
    log_dir: PathBuf,
}

/// The serialized `SimpleRequest` ghz sends (`-B`), made by wirescope's own encoder.
fn request_file(dir: &Path, size: usize) -> Result<PathBuf> {
    use wirescope::traffic::grpc::proto::{payload_body, RequestTemplate, PREFIX_LEN};
    let t = RequestTemplate::new(payload_body(size), size as u32, None);
    let wire: Vec<u8> = t.chunks().iter().flat_map(|c| c.to_vec()).collect();
    let path = dir.join(format!("simple-request-{size}.bin"));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&path, &wire[PREFIX_LEN..])
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Servers running on loopback or in side B of a namespace pair.
/// Field order: servers are killed before the namespaces go.
struct Place {
    ws: Server,
    go: Server,
    ws_pid: u32,
    go_pid: u32,
    pair: Option<NetnsPair>,
    host: &'static str,
}

impl Place {
    fn start(net: Net, t: &Tools) -> Result<Self> {
        let pair = match net {
            Net::Veth => Some(NetnsPair::create()?),
            _ => None,
        };
        let host = if pair.is_some() { ADDR_B } else { "127.0.0.1" };
        let cmd = |program: &Path| match &pair {
            Some(p) => p.command(Side::B, program),
            None => Command::new(program),
        };
        let mut ws = cmd(&t.wirescope);
        ws.args(["serve", "grpc", "--interval", "0", "--listen"])
            .arg(format!("{host}:{WS_PORT}"));
        let mut go = cmd(&t.refs.grpcgo);
        go.arg("-addr").arg(format!("{host}:{GO_PORT}"));
        let ws = Server::spawn("wirescope-serve-grpc", ws, &t.log_dir)?;
        let go = Server::spawn("grpcgo-bench", go, &t.log_dir)?;
        let (ws_pid, go_pid) = (ws.pid(), go.pid());
        let mut place = Place {
            ws,
            go,
            ws_pid,
            go_pid,
            pair,
            host,
        };
        place.wait_listening(WS_PORT)?;
        place.wait_listening(GO_PORT)?;
        Ok(place)
    }

    fn wait_listening(&mut self, port: u16) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.ws.ensure_running()?;
            self.go.ensure_running()?;
            let mut ss = match &self.pair {
                Some(p) => p.command(Side::B, "ss"),
                None => Command::new("ss"),
            };
            ss.arg("-Hltn");
            let table = cmd::output(&mut ss)?;
            let suffix = format!("{}:{port}", self.host);
            if table.lines().any(|l| l.contains(&suffix)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("nothing listens on {suffix} after 10 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A command on the client side (side A, or this namespace).
    fn client(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match &self.pair {
            Some(p) => p.command(Side::A, program),
            None => Command::new(program),
        }
    }

    fn describe(&self) -> String {
        match &self.pair {
            Some(p) => p.describe(),
            None => "loopback 127.0.0.1 (client and servers in one namespace)".into(),
        }
    }
}

/// Which server a run talks to.
#[derive(Clone, Copy)]
enum To {
    Ws,
    Go,
}

impl Place {
    fn addr(&self, to: To) -> String {
        let port = match to {
            To::Ws => WS_PORT,
            To::Go => GO_PORT,
        };
        format!("{}:{port}", self.host)
    }
    fn server_pid(&self, to: To) -> u32 {
        match to {
            To::Ws => self.ws_pid,
            To::Go => self.go_pid,
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy, Default)]
struct RunResult {
    rps: f64,
    /// Payload MB/s received by the client.
    mbps: f64,
    p50_us: f64,
    p99_us: f64,
    errors: u64,
    client_rss: u64,
    server_hwm: u64,
}

fn ws_client(
    p: &Place,
    t: &Tools,
    to: To,
    mode: &str,
    size: usize,
    secs: u64,
) -> Result<RunResult> {
    let mut c = p.client(&t.wirescope);
    let (size, time) = (size.to_string(), format!("{secs}s"));
    c.args(["run", "--engine", "grpc", "--target", &p.addr(to)])
        .args(["--mode", mode, "--ebpf", "off"])
        .args(["--channels", CHANNELS, "--concurrency", CONCURRENCY])
        .args(["--size", &size, "--resp-size", &size])
        .args(["-t", &time, "--omit", "0s", "--json"]);
    let (out, rss) = measured(p, c, to)?;
    let v: Value = serde_json::from_str(out.trim()).context("reading wirescope's JSON summary")?;
    if let Some(e) = v["error"].as_str() {
        bail!("wirescope reported an error: {e}");
    }
    let (g, l) = (&v["grpc"], &v["latency_us"]);
    let num = |x: &Value| x.as_f64().unwrap_or(f64::NAN);
    Ok(RunResult {
        rps: num(&g["rpcs_per_s"]),
        mbps: num(&g["response_bytes_per_s"]) / 1e6,
        p50_us: num(&l["p50"]),
        p99_us: num(&l["p99"]),
        errors: g["errors"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum()),
        client_rss: rss.0,
        server_hwm: rss.1,
    })
}

fn ghz(p: &Place, t: &Tools, to: To, large: bool, secs: u64) -> Result<RunResult> {
    let mut c = p.client(&t.refs.ghz);
    let data = if large { &t.large } else { &t.small };
    c.args(["--insecure", "--protoset"])
        .arg(&t.refs.protoset)
        .args(["--call", "grpc.testing.BenchmarkService.UnaryCall", "-B"])
        .arg(data)
        .args(["--connections", CHANNELS, "-c", CONCURRENCY])
        .args(["-z", &format!("{secs}s"), "--format", "json"])
        .arg(p.addr(to));
    let (out, rss) = measured(p, c, to)?;
    let v: Value = serde_json::from_str(out.trim()).context("reading ghz's JSON")?;
    let ok = v["statusCodeDistribution"]["OK"].as_u64().unwrap_or(0);
    let count = v["count"].as_u64().unwrap_or(0);
    let total_s = v["total"].as_f64().unwrap_or(f64::NAN) / 1e9;
    let lat = |pct: f64| {
        v["latencyDistribution"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["percentage"].as_f64() == Some(pct)))
            .and_then(|e| e["latency"].as_f64())
            .map_or(f64::NAN, |ns| ns / 1e3)
    };
    let size = if large { LARGE } else { SMALL } as f64;
    Ok(RunResult {
        rps: v["rps"].as_f64().unwrap_or(f64::NAN),
        mbps: ok as f64 * size / total_s / 1e6,
        p50_us: lat(50.0),
        p99_us: lat(99.0),
        errors: count - ok.min(count),
        client_rss: rss.0,
        server_hwm: rss.1,
    })
}

/// Run a client to its end; returns its stdout, its peak RSS (wait4's
/// ru_maxrss) and the server's VmHWM over the run, both in bytes.
fn measured(p: &Place, mut c: Command, to: To) -> Result<(String, (u64, u64))> {
    let pid = p.server_pid(to);
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("resetting the peak RSS of server pid {pid}"))?;
    let what = cmd::describe(&c);
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{what}`"))?;
    let mut stdout = child.stdout.take().context("client stdout")?;
    let mut stderr = child.stderr.take().context("client stderr")?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (status, maxrss_kib) =
        wait4(child.id()).with_context(|| format!("waiting for `{what}`"))?;
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    if status != 0 {
        bail!("`{what}` failed (wait status {status}):\n{}", err.trim());
    }
    let hwm = server_hwm(pid)?;
    std::thread::sleep(SETTLE);
    Ok((out, (maxrss_kib * 1024, hwm)))
}

/// Reap `pid`; its wait status and ru_maxrss (KiB).
fn wait4(pid: u32) -> Result<(i32, u64)> {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    if r < 0 {
        return Err(std::io::Error::last_os_error()).context("wait4");
    }
    Ok((status, u64::try_from(ru.ru_maxrss).unwrap_or(0)))
}

fn server_hwm(pid: u32) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let status = wirescope::traffic::grpc::memory::parse_status(&s)
        .with_context(|| format!("/proc/{pid}/status"))?;
    status
        .vmhwm
        .map(|kib| kib * 1024)
        .context("no VmHWM in the server's status")
}

/// One pairing of a round: its name, where its results go, how to run it.
type Pairing<'a> = (
    &'static str,
    &'a mut Vec<RunResult>,
    Box<dyn Fn() -> Result<RunResult> + 'a>,
);

/// Every round of the 64 B pairings.
#[derive(Default)]
struct Unary {
    ws_ws: Vec<RunResult>,
    ghz_go: Vec<RunResult>,
    ws_go: Vec<RunResult>,
    ghz_ws: Vec<RunResult>,
    stream_ws: Vec<RunResult>,
    stream_go: Vec<RunResult>,
}

fn unary_rounds(p: &Place, t: &Tools, c: Common) -> Result<Unary> {
    let mut u = Unary::default();
    for round in 1..=c.rounds {
        let s = c.time;
        let runs: [Pairing<'_>; 6] = [
            (
                "wirescope -> wirescope",
                &mut u.ws_ws,
                Box::new(|| ws_client(p, t, To::Ws, "unary", SMALL, s)),
            ),
            (
                "ghz -> grpc-go",
                &mut u.ghz_go,
                Box::new(|| ghz(p, t, To::Go, false, s)),
            ),
            (
                "wirescope -> grpc-go",
                &mut u.ws_go,
                Box::new(|| ws_client(p, t, To::Go, "unary", SMALL, s)),
            ),
            (
                "ghz -> wirescope",
                &mut u.ghz_ws,
                Box::new(|| ghz(p, t, To::Ws, false, s)),
            ),
            (
                "stream wirescope -> wirescope",
                &mut u.stream_ws,
                Box::new(|| ws_client(p, t, To::Ws, "stream", SMALL, s)),
            ),
            (
                "stream wirescope -> grpc-go",
                &mut u.stream_go,
                Box::new(|| ws_client(p, t, To::Go, "stream", SMALL, s)),
            ),
        ];
        for (name, into, f) in runs {
            let r = f()?;
            eprintln!(
                "xtask: round {round}/{}  {name:<30} {:>9.0} /s  p50 {:>8.0} us  errors {}",
                c.rounds, r.rps, r.p50_us, r.errors
            );
            into.push(r);
        }
    }
    Ok(u)
}

/// The 4 MiB point: one run per stack.
struct Large {
    ws: RunResult,
    ghz: RunResult,
}

fn large_point(p: &mut Place, t: &Tools, secs: u64) -> Result<Large> {
    let ws = ws_client(p, t, To::Ws, "unary", LARGE, secs)?;
    eprintln!("xtask: 4 MiB wirescope -> wirescope {:.0} MB/s", ws.mbps);
    let ghz = ghz(p, t, To::Go, true, secs)?;
    eprintln!("xtask: 4 MiB ghz -> grpc-go {:.0} MB/s", ghz.mbps);
    Ok(Large { ws, ghz })
}

fn med(v: &[RunResult], f: impl Fn(&RunResult) -> f64) -> f64 {
    median(&v.iter().map(f).collect::<Vec<_>>())
}

fn print_report(what: &str, c: Common, u: &Unary, large: Option<&Large>) {
    println!("== bench grpc: wirescope vs ghz / grpc-go benchmark server ==");
    println!("net:     {what}");
    println!(
        "runs:    {} round(s) x {} s, alternating the pairings below; unary 64 B, {CHANNELS} connections x {CONCURRENCY} in flight",
        c.rounds, c.time
    );
    println!("/s = completed RPCs (streaming: messages) per second; client-side figures\n");
    let rps = |v: &Vec<RunResult>| med(v, |r| r.rps);
    let base = rps(&u.ghz_go);
    let rows: Vec<Vec<String>> = [
        ("wirescope -> wirescope", &u.ws_ws, "1.6"),
        ("ghz -> grpc-go", &u.ghz_go, "-"),
        ("wirescope -> grpc-go", &u.ws_go, "1.3"),
        ("ghz -> wirescope", &u.ghz_ws, "1.0"),
        ("stream: wirescope -> wirescope", &u.stream_ws, "-"),
        ("stream: wirescope -> grpc-go", &u.stream_go, "-"),
    ]
    .iter()
    .map(|(name, v, goal)| {
        vec![
            name.to_string(),
            format!("{:.0}", rps(v)),
            ratio(rps(v), base),
            goal.to_string(),
            format!("{:.0}", med(v, |r| r.p50_us)),
            format!("{:.0}", med(v, |r| r.p99_us)),
            format!("{:.1}", med(v, |r| r.server_hwm as f64 / 1e6)),
            v.iter().map(|r| r.errors).sum::<u64>().to_string(),
            list(&v.iter().map(|r| r.rps).collect::<Vec<_>>(), 0),
        ]
    })
    .collect();
    let header = [
        "pairing",
        "median /s",
        "vs ghz->grpc-go",
        "goal",
        "p50 us",
        "p99 us",
        "server VmHWM MB",
        "errors",
        "rounds /s",
    ];
    print!("{}", table::render(&header, &rows));
    if let Some(l) = large {
        println!(
            "\n4 MiB unary ({LARGE} B payload each way, fits grpc-go's 4 MiB limit), {CHANNELS} x {CONCURRENCY}, one run each:"
        );
        let row = |name: &str, r: &RunResult| {
            vec![
                name.to_string(),
                format!("{:.0}", r.mbps),
                format!("{:.1}", r.client_rss as f64 / 1e6),
                format!("{:.1}", r.server_hwm as f64 / 1e6),
                r.errors.to_string(),
            ]
        };
        let header = [
            "stack",
            "MB/s received",
            "client peak RSS MB",
            "server VmHWM MB",
            "errors",
        ];
        let rows = vec![
            row("wirescope -> wirescope", &l.ws),
            row("ghz -> grpc-go", &l.ghz),
        ];
        print!("{}", table::render(&header, &rows));
    }
    println!();
}
