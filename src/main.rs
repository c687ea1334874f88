//! The `wirescope` binary: parse, dispatch, map results to exit codes.

use clap::Parser;
use std::process::ExitCode;
use wirescope::cli::{AgentArgs, Cli, Command};
use wirescope::headless::{self, EXIT_FAILED, EXIT_OK};
use wirescope::session::agent::{self, AgentConfig};
use wirescope::session::auth::{load_token, TokenOrigin};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = Cli::parse();
    let result = match cli.command {
        None | Some(Command::Tui(_)) => {
            let args = match cli.command {
                Some(Command::Tui(t)) => *t,
                _ => wirescope::cli::TuiArgs::defaults(),
            };
            wirescope::tui::run(args, argv)
        }
        Some(Command::Agent(a)) => run_agent(a),
        Some(Command::Run(r)) => headless::run(*r, argv),
        Some(Command::Watch(w)) => wirescope::watch::watch(w, argv),
        Some(Command::Capture(c)) => wirescope::watch::capture(c),
        Some(Command::Check(c)) => wirescope::check::command(c),
        Some(Command::SinkLab(s)) => wirescope::sink_lab::command(*s),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn run_agent(a: AgentArgs) -> anyhow::Result<u8> {
    let (token, origin) = load_token(a.token_file.as_deref(), true)?;
    let hint = match &origin {
        TokenOrigin::Env => "token from $WIRESCOPE_TOKEN".to_string(),
        TokenOrigin::File(p) => format!("token file {}", p.display()),
        TokenOrigin::Created(p) => format!("token file {}", p.display()),
    };
    if let TokenOrigin::Created(p) = &origin {
        eprintln!("wirescope agent: created a new token in {} (mode 0600); copy it to the controller's ~/.config/wirescope/token or pass --token-file", p.display());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ws-agent")
        .worker_threads(2)
        .build()?;
    rt.block_on(async move {
        let shutdown = tokio_util::sync::CancellationToken::new();
        headless::spawn_signal_handler(shutdown.clone());
        let cfg = AgentConfig {
            listen: a.listen,
            unix: a.control_unix.clone(),
            token,
            once: a.once,
            token_hint: hint.clone(),
        };
        let (addr, serve) = agent::bind(cfg, shutdown).await?;
        eprintln!("wirescope agent: listening on {addr} (control and data), {hint}");
        serve.await;
        if let Some(p) = &a.control_unix {
            let _ = std::fs::remove_file(p);
        }
        Ok(EXIT_OK)
    })
}
