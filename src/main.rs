//! The `wirescope` binary: parse, dispatch, map results to exit codes.
//!
//! Arguments are read as OS strings, so an argument that is not UTF-8 is a
//! usage error clap reports, not a panic.

use clap::Parser;
use std::process::ExitCode;
use wirescope::cli::{AgentArgs, Cli, Command};
use wirescope::face::{FaceError, FaceResult, EXIT_OK};
use wirescope::session::agent::{self, AgentConfig};
use wirescope::session::auth::{load_token, TokenOrigin};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Another tool's letter that wirescope would misread: refused with the long form.
    if let Err(e) = wirescope::cli::habits::check(&argv) {
        eprintln!("error: {e}");
        return ExitCode::from(wirescope::face::EXIT_USAGE);
    }
    let cli = Cli::parse_from(args);
    init_logging(&cli);
    // Tests with thousands of connections need three descriptors each.
    wirescope::session::net::raise_nofile_limit();
    let result = match cli.command {
        None | Some(Command::Tui(_)) => {
            let args = match cli.command {
                Some(Command::Tui(t)) => *t,
                _ => wirescope::cli::TuiArgs::defaults(),
            };
            wirescope::tui::run(args, argv)
        }
        Some(Command::Agent(a)) => run_agent(a),
        Some(Command::Run(r)) => wirescope::face::run::run(*r, argv),
        Some(Command::Watch(w)) => wirescope::face::watch::watch(w, argv),
        Some(Command::Capture(c)) => wirescope::face::capture::capture(c),
        Some(Command::Check(c)) => wirescope::face::check::command(c),
        Some(Command::Profile(p)) => wirescope::face::profile::command(p).map_err(FaceError::from),
        Some(Command::Checklist(c)) => wirescope::face::checklist::command(c, argv),
        Some(Command::Completions(c)) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(c.shell, &mut cmd, "wirescope", &mut script);
            wirescope::face::out(&String::from_utf8_lossy(&script));
            Ok(0)
        }
        Some(Command::Report(r)) => wirescope::face::report::command(r),
        Some(Command::Compare(c)) => wirescope::face::compare::command(c),
        Some(Command::Fleet(f)) if f.tui => wirescope::tui::fleet::run(*f, argv),
        Some(Command::Fleet(f)) => wirescope::face::fleet::fleet(*f, argv),
        Some(Command::Serve(s)) => wirescope::face::serve::command(s).map_err(FaceError::from),
    };
    // Output that could not be written (a full disk behind `>`) fails the
    // command, whichever face printed it; a closed pipe (`| head`) does not.
    let result = match (result, wirescope::face::stdout_result()) {
        (Ok(_), Err(e)) => Err(e),
        (r, _) => r,
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            match &e {
                FaceError::Usage(m) => eprintln!("error: {m}"),
                FaceError::Failed(a) => {
                    eprintln!("error: {}", wirescope::face::error_text(a.as_ref()))
                }
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// One subscriber for the process; where lines go and the default level
/// depend on the face (see `wirescope::logging`).
fn init_logging(cli: &Cli) {
    use wirescope::logging::Face;
    let (face, dir) = match &cli.command {
        Some(Command::Agent(a)) => (Face::Agent, a.state_dir.as_deref()),
        None | Some(Command::Tui(_)) => (Face::Tui, None),
        Some(Command::Fleet(f)) if f.tui => (Face::Tui, None),
        Some(_) => (Face::Cli, None),
    };
    let dir = wirescope::tune::state::StateDir::resolve(wirescope::cli::state_dir_given(dir));
    wirescope::logging::init(cli.verbose, cli.quiet, face, dir.path().to_path_buf());
}

fn run_agent(a: AgentArgs) -> FaceResult {
    let (token, origin) = load_token(a.token_file.as_deref(), true).map_err(anyhow::Error::from)?;
    let hint = match &origin {
        TokenOrigin::Env => "token from $WIRESCOPE_TOKEN".to_string(),
        TokenOrigin::File(p) => format!("token file {}", p.display()),
        TokenOrigin::Created(p) => format!("token file {}", p.display()),
    };
    if let Some(w) = token.weakness() {
        tracing::warn!(target: "agent", "{w} ({hint})");
    }
    if let TokenOrigin::Created(p) = &origin {
        tracing::warn!(target: "agent", "created a new token in {} (mode 0600); copy it to the controller's ~/.config/wirescope/token or pass --token-file", p.display());
    }
    // Bound before anything else starts: a bad address is the first error.
    let (observer, endpoint) = wirescope::face::metrics::serve_agent(a.metrics)?.unzip();
    if let Some(e) = &endpoint {
        tracing::info!(target: "agent", "serving metrics at http://{}/metrics", e.local_addr());
    }
    let rt = wirescope::face::control_runtime("ws-agent").map_err(anyhow::Error::from)?;
    let result = rt.block_on(async move {
        let shutdown = tokio_util::sync::CancellationToken::new();
        wirescope::face::spawn_signal_handler(shutdown.clone());
        let cfg = AgentConfig {
            listen: match a.port {
                Some(p) => std::net::SocketAddr::from(([0, 0, 0, 0], p)),
                None => a.listen,
            },
            unix: a.control_unix.clone(),
            token,
            once: a.once,
            token_hint: hint.clone(),
            allow_tuning: a.allow_tuning,
            state_dir: wirescope::cli::state_dir_given(a.state_dir.as_deref()).map(Into::into),
            observer,
        };
        let (addr, serve) = agent::bind(cfg, shutdown)
            .await
            .map_err(anyhow::Error::from)?;
        tracing::info!(target: "agent", "listening on {addr} (control and data), {hint}");
        serve.await;
        if let Some(p) = &a.control_unix {
            let _ = std::fs::remove_file(p);
        }
        Ok(EXIT_OK)
    });
    // A blocking task still inside the kernel must not keep a stopped agent
    // alive: give tasks a moment, then exit without them.
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    drop(endpoint);
    result
}
