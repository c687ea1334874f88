//! `wirescope profile list | show | save | diff | apply | rollback | finish`:
//! the command functions (the argument types are in [`crate::cli::profile`]).
//!
//! The functions only choose what to print; every decision is in the
//! modules below (resolve, apply, diff, snapshot). Human text goes to
//! stdout, except for `apply --dry-run`, whose stdout is exactly the
//! equivalent commands (one per line, ready to paste) and whose summary goes
//! to stderr. `--json` prints the records instead ([`ApplyReport`] is the
//! before → after record the log carries).
//!
//! Test hook (not for users): with `WIRESCOPE_TEST_PAUSE_AFTER=N` in the
//! environment, `apply` and `finish` stop after N settings are written and
//! journaled, print `wirescope: test hook: paused after N of T settings` on
//! stderr and wait until killed, so tests can kill an apply between two
//! settings at a known point.

use crate::cli::profile::*;
use crate::tune::apply::{self, ApplyOptions, ApplyReport, Change, RollbackReport};
use crate::tune::diff::{self, Side};
use crate::tune::error::TuneError;
use crate::tune::host::Host;
use crate::tune::library;
use crate::tune::peer::{TuneRequest, TuneResponse};
use crate::tune::resolve::ResolveOpts;
use crate::tune::snapshot::{snapshot, Snapshot};
use crate::tune::state::StateDir;
use std::io::{BufRead, IsTerminal, Write as _};
use std::path::PathBuf;

const EXIT_OK: u8 = 0;
const EXIT_DIFFERENT: u8 = 1;

/// Environment variable of the test hook (see the module docs).
pub const TEST_PAUSE_ENV: &str = "WIRESCOPE_TEST_PAUSE_AFTER";

/// Run `wirescope profile ...`; the exit code.
pub fn command(args: ProfileArgs) -> anyhow::Result<u8> {
    let state = StateDir::resolve(crate::cli::state_dir_given(args.state_dir.as_deref()));
    match args.command {
        ProfileCommand::List(a) => list(&state, &a),
        ProfileCommand::Show(a) => show(&state, &a),
        ProfileCommand::Save(a) => save(&state, &a),
        ProfileCommand::Diff(a) => diff_cmd(&state, &a),
        ProfileCommand::Apply(a) => apply_cmd(&state, &a),
        ProfileCommand::Rollback(a) => rollback_cmd(&state, &a),
        ProfileCommand::Finish(a) => finish_cmd(&state, &a),
    }
}

fn host_for(from: Option<&PathBuf>) -> anyhow::Result<Host> {
    match from {
        Some(d) if !d.is_dir() => anyhow::bail!("--from {}: not a directory", d.display()),
        Some(d) => Ok(Host::at_root(d)),
        None => Ok(Host::live()),
    }
}

fn list(state: &StateDir, a: &ListArgs) -> anyhow::Result<u8> {
    let items = library::list(state);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(EXIT_OK);
    }
    let w = items.iter().map(|i| i.name.len()).max().unwrap_or(4).max(4);
    outln!("{:w$}  {:10}  FOR", "NAME", "ORIGIN");
    for i in &items {
        let origin = if i.origin == "shipped" {
            "shipped"
        } else {
            "saved"
        };
        match &i.error {
            Some(e) => outln!("{:w$}  {origin:10}  (does not load: {e})", i.name),
            None => outln!("{:w$}  {origin:10}  {}", i.name, i.purpose),
        }
    }
    outln!("(saved profiles are in {})", state.profiles_dir().display());
    Ok(EXIT_OK)
}

fn show(state: &StateDir, a: &ShowArgs) -> anyhow::Result<u8> {
    let f = library::find(&a.profile, state)?;
    outln!("# {} ({})", f.profile.name, f.origin);
    outp!("{}", f.text);
    if !f.text.ends_with('\n') {
        outln!();
    }
    Ok(EXIT_OK)
}

fn save(state: &StateDir, a: &SaveArgs) -> anyhow::Result<u8> {
    let snap = match &a.peer {
        Some(peer) => {
            let req = TuneRequest::Save {
                name: a.name.clone(),
                ifaces: a.ifaces.clone(),
            };
            match peer_request(peer, a.token_file.as_deref(), req)? {
                TuneResponse::Saved { profile, notes } => Snapshot {
                    text: profile,
                    notes,
                },
                other => anyhow::bail!("unexpected answer from the agent: {other:?}"),
            }
        }
        None => snapshot(&host_for(a.from.as_ref())?, &a.name, &a.ifaces)?,
    };
    for n in &snap.notes {
        eprintln!("wirescope: not recorded: {n}");
    }
    let path = match &a.output {
        Some(p) if p.as_os_str() == "-" => {
            outp!("{}", snap.text);
            return Ok(EXIT_OK);
        }
        Some(p) => p.clone(),
        None => library::saved_path(state, &a.name),
    };
    if path.exists() && !a.force {
        anyhow::bail!("{} exists; pass --force to overwrite it", path.display());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, &snap.text)
        .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    outln!("saved profile {} to {}", a.name, path.display());
    Ok(EXIT_OK)
}

/// A diff side; `peer` is the agent host's current values (read through the agent).
fn side_or_peer(arg: &str, state: &StateDir, a: &DiffArgs) -> anyhow::Result<Side> {
    match arg {
        "live" => return Ok(Side::Live),
        "peer" => {}
        _ => return Ok(Side::Profile(Box::new(library::find(arg, state)?.profile))),
    }
    let Some(peer) = &a.peer else {
        anyhow::bail!("`peer` needs --peer HOST (the agent whose host it means)");
    };
    let req = TuneRequest::Save {
        name: "peer".into(),
        ifaces: Vec::new(),
    };
    match peer_request(peer, a.token_file.as_deref(), req)? {
        TuneResponse::Saved { profile, .. } => Ok(Side::Profile(Box::new(
            crate::tune::profile::Profile::parse(&profile, &format!("peer {peer}"))?,
        ))),
        other => anyhow::bail!("unexpected answer from the agent: {other:?}"),
    }
}

fn diff_cmd(state: &StateDir, a: &DiffArgs) -> anyhow::Result<u8> {
    let host = host_for(a.from.as_ref())?;
    let sa = side_or_peer(&a.a, state, a)?;
    let sb = side_or_peer(&a.b, state, a)?;
    let opts = ResolveOpts {
        route_to: a.route.route_to,
        subject: None,
    };
    let d = diff::diff(&sa, &sb, &host, &opts);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        outp!("{}", diff::render(&d));
    }
    Ok(if a.exit_code && !d.lines.is_empty() {
        EXIT_DIFFERENT
    } else {
        EXIT_OK
    })
}

fn ask(prompt: &str) -> anyhow::Result<String> {
    eprint!("{prompt}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}

fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The test hook (module docs): pause after N settings until killed.
fn pause_hook(done: usize, total: usize) {
    if std::env::var(TEST_PAUSE_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        == Some(done)
    {
        eprintln!("wirescope: test hook: paused after {done} of {total} settings");
        loop {
            std::thread::park();
        }
    }
}

/// An interrupted apply is pending: on a terminal, offer to finish or undo it.
fn resolve_interrupted(host: &Host, state: &StateDir, err: TuneError) -> anyhow::Result<()> {
    if !interactive() {
        return Err(err.into());
    }
    eprintln!("wirescope: {err}");
    match ask("finish it (f), undo it (u), or cancel (c)? ")?.as_str() {
        "f" | "F" => {
            let r = apply::finish(host, state, &ApplyOptions::default())?;
            print_apply(&r, "finished");
            Ok(())
        }
        "u" | "U" => {
            let r = apply::rollback(host, state)?;
            print_rollback(&r);
            Ok(())
        }
        _ => anyhow::bail!("cancelled; nothing was changed"),
    }
}

fn apply_cmd(state: &StateDir, a: &ApplyArgs) -> anyhow::Result<u8> {
    let found = library::find(&a.profile, state)?;
    if let Some(peer) = &a.peer {
        return apply_peer(peer, &found.text, a);
    }
    let host = host_for(a.from.as_ref())?;
    let opts = ResolveOpts {
        route_to: a.route.route_to,
        subject: None,
    };
    if !a.dry_run {
        if let Err(e @ TuneError::Interrupted { .. }) = apply::check_interrupted(state) {
            resolve_interrupted(&host, state, e)?;
        }
    }
    let (plan, skipped) = apply::plan(&found.profile, &host, &opts, a.skip_unsupported)?;
    for p in &skipped {
        eprintln!("wirescope: skipped (unsupported here): {p}");
    }
    for n in &plan.notes {
        eprintln!("wirescope: note: {n}");
    }
    let changes = plan.changes();
    if a.dry_run {
        for c in &changes {
            outln!("{}", c.command());
        }
        eprintln!(
            "wirescope: dry run of profile {} on {}: {} change(s), {} already set; nothing was changed",
            plan.profile,
            plan.host,
            changes.len(),
            plan.settings.len() - changes.len()
        );
        return Ok(EXIT_OK);
    }
    if changes.is_empty() {
        outln!(
            "profile {}: all {} setting(s) already have their values; nothing to change",
            plan.profile,
            plan.settings.len()
        );
        return Ok(EXIT_OK);
    }
    if !a.yes {
        confirm_changes(
            &plan,
            &changes,
            "",
            " (or --dry-run to see the commands)",
            "",
        )?;
    }
    let aopts = ApplyOptions {
        skip_unsupported: a.skip_unsupported,
        after_step: Some(&pause_hook),
    };
    let report = apply::apply_plan(&plan, &found.profile.source, skipped, &host, state, &aopts)?;
    json_or_text(a.json, &report, |r| print_apply(r, "applied"))
}

/// `profile apply --peer`: the agent resolves the profile on its host (the
/// plan is shown, or printed with --dry-run), then applies it all-or-nothing
/// with a backup there.
fn apply_peer(peer: &str, source: &str, a: &ApplyArgs) -> anyhow::Result<u8> {
    let plan = TuneRequest::Plan {
        profile: source.to_string(),
        skip_unsupported: a.skip_unsupported,
    };
    let (plan, skipped) = match peer_request(peer, a.token_file.as_deref(), plan)? {
        TuneResponse::Planned { plan, skipped } => (plan, skipped),
        other => anyhow::bail!("unexpected answer from the agent: {other:?}"),
    };
    for p in &skipped {
        eprintln!("wirescope: skipped on the peer (unsupported there): {p}");
    }
    if let Some(p) = plan.problems.first() {
        anyhow::bail!(
            "the peer cannot take profile {}: {p}; nothing was changed (--skip-unsupported drops settings it does not have)",
            plan.profile
        );
    }
    let changes = plan.changes();
    if a.dry_run {
        for c in &changes {
            outln!("{}", c.command());
        }
        eprintln!(
            "wirescope: dry run of profile {} on the peer {}: {} change(s); nothing was changed",
            plan.profile,
            plan.host,
            changes.len()
        );
        return Ok(EXIT_OK);
    }
    if changes.is_empty() {
        outln!("profile {}: the peer already has every value", plan.profile);
        return Ok(EXIT_OK);
    }
    if !a.yes {
        confirm_changes(&plan, &changes, "the peer ", "", " there")?;
    }
    let req = TuneRequest::Apply {
        profile: source.to_string(),
        skip_unsupported: a.skip_unsupported,
    };
    let report = match peer_request(peer, a.token_file.as_deref(), req)? {
        TuneResponse::Applied(r) => r,
        other => anyhow::bail!("unexpected answer from the agent: {other:?}"),
    };
    json_or_text(a.json, &report, |r| print_apply(r, "applied on the peer"))
}

/// Without --yes: on a terminal, list the `changes` of `plan` and ask;
/// elsewhere refuse and say to add --yes. `on` comes before the host's name
/// (`the peer `), `hint` ends the refusal and `there` ends the question.
fn confirm_changes(
    plan: &crate::tune::resolve::Plan,
    changes: &[&crate::tune::resolve::Planned],
    on: &str,
    hint: &str,
    there: &str,
) -> anyhow::Result<()> {
    if !interactive() {
        anyhow::bail!(
            "profile {} would change {} setting(s) on {on}{}; add --yes to apply without a prompt{hint}",
            plan.profile,
            changes.len(),
            plan.host
        );
    }
    eprintln!("profile {} on {on}{}:", plan.profile, plan.host);
    for c in changes {
        eprintln!("  {}: {} -> {}", c.key, c.current_text(), c.target);
    }
    let question = format!("apply these {} change(s){there}? [y/N] ", changes.len());
    if !ask(&question)?.eq_ignore_ascii_case("y") {
        anyhow::bail!("cancelled; nothing was changed");
    }
    Ok(())
}

/// One tuning request to the agent at `peer`; refusals and failures are errors.
fn peer_request(
    peer: &str,
    token_file: Option<&std::path::Path>,
    req: TuneRequest,
) -> anyhow::Result<TuneResponse> {
    use crate::session::controller::{Controller, Target};
    let addr = crate::cli::resolve_peer(peer).map_err(|e| anyhow::anyhow!(e.0))?;
    let (token, _) = crate::session::auth::load_token(token_file, false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let resp = rt.block_on(async move {
        let mut ctl = Controller::connect(Target::Tcp(addr), &token).await?;
        let r = ctl.tune(req).await;
        ctl.close().await;
        r
    });
    match resp.map_err(|e| anyhow::anyhow!(super::error_text(&e)))? {
        TuneResponse::Refused { reason } => anyhow::bail!(reason),
        TuneResponse::Failed { error } => anyhow::bail!(error),
        r => Ok(r),
    }
}

/// `v` as pretty JSON with --json, else as `text` prints it; exit 0.
fn json_or_text<T: serde::Serialize>(
    json: bool,
    v: &T,
    text: impl FnOnce(&T),
) -> anyhow::Result<u8> {
    if json {
        outln!("{}", serde_json::to_string_pretty(v)?);
    } else {
        text(v);
    }
    Ok(EXIT_OK)
}

/// One line per change, the settings' names aligned.
fn print_changes(changes: &[Change]) {
    let w = changes.iter().map(|c| c.setting.len()).max().unwrap_or(0);
    for c in changes {
        outln!("  {:w$}  {}  ->  {}", c.setting, c.before, c.after);
    }
}

fn print_apply(r: &ApplyReport, verb: &str) {
    outln!("profile {} on {}:", r.profile, r.host);
    print_changes(&r.changes);
    outln!(
        "{verb} {} setting(s) ({} already set); backup {}; undo with `wirescope profile rollback`",
        r.changes.len(),
        r.unchanged,
        r.backup
    );
}

fn print_rollback(r: &RollbackReport) {
    outln!(
        "rolled back profile {} (backup {}) on {}:",
        r.profile,
        r.backup,
        r.host
    );
    print_changes(&r.restored);
    for d in &r.drifted {
        outln!("  note: {d} had been changed by something else since; restored anyway");
    }
    outln!(
        "restored {} setting(s); {} already had the value from before the apply",
        r.restored.len(),
        r.already
    );
}

fn rollback_cmd(state: &StateDir, a: &RollbackArgs) -> anyhow::Result<u8> {
    if a.list {
        return list_backups(state, a.json);
    }
    if let Some(id) = &a.discard {
        let (id, backup) = state.discard(Some(id.as_str()).filter(|i| !i.is_empty()))?;
        if a.json {
            outln!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({"discarded": id, "backup": backup})
                )?
            );
        } else {
            match &backup {
                Some(b) => outln!(
                    "discarded backup {id} of profile {} ({}); nothing was restored",
                    b.profile,
                    origin_of(b)
                ),
                None => outln!(
                    "discarded backup {id} (it did not read as a backup); nothing was restored"
                ),
            }
        }
        return Ok(EXIT_OK);
    }
    if let Some(peer) = &a.peer {
        let r = match peer_request(peer, a.token_file.as_deref(), TuneRequest::Rollback)? {
            TuneResponse::RolledBack(r) => r,
            other => anyhow::bail!("unexpected answer from the agent: {other:?}"),
        };
        return json_or_text(a.json, &r, print_rollback);
    }
    let host = Host::live();
    if let Some(p) = apply::pending(state)? {
        eprintln!(
            "wirescope: undoing the interrupted apply of profile {} ({} of {} settings were confirmed)",
            p.profile, p.done, p.total
        );
    }
    let r = apply::rollback(&host, state)?;
    json_or_text(a.json, &r, print_rollback)
}

/// Where a backup was taken, for people: host and namespace name (or inode).
fn origin_of(b: &crate::tune::state::Backup) -> String {
    let ns = match &b.netns {
        Some(n) => n.describe(),
        None => b.namespace.clone(),
    };
    format!("{}, {ns}", b.hostname)
}

fn list_backups(state: &StateDir, json: bool) -> anyhow::Result<u8> {
    let entries = state.entries()?;
    if json {
        let v: Vec<_> = entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "backup": e.backup,
                    "status": format!("{:?}", e.status()),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(EXIT_OK);
    }
    if entries.is_empty() {
        outln!("no backups in {}", state.path().display());
        return Ok(EXIT_OK);
    }
    for e in &entries {
        let status = match e.status() {
            crate::tune::state::Status::Applied => "in effect",
            crate::tune::state::Status::Incomplete => "partly restored",
            crate::tune::state::Status::Interrupted { .. } => "interrupted",
            crate::tune::state::Status::Restored => "restored after a failure",
            crate::tune::state::Status::RolledBack => "rolled back",
        };
        outln!("{}  {status}", e.backup.id);
        outln!(
            "  profile  {} ({} settings)",
            e.backup.profile,
            e.backup.steps.len()
        );
        outln!("  when     {}", e.backup.created);
        outln!("  where    {}", origin_of(&e.backup));
        if !e.backup.command.is_empty() {
            outln!("  command  {}", e.backup.command);
        }
    }
    Ok(EXIT_OK)
}

fn finish_cmd(state: &StateDir, a: &FinishArgs) -> anyhow::Result<u8> {
    let r = match &a.peer {
        Some(peer) => match peer_request(peer, a.token_file.as_deref(), TuneRequest::Finish)? {
            TuneResponse::Applied(r) => r,
            other => anyhow::bail!("unexpected answer from the agent: {other:?}"),
        },
        None => {
            let host = Host::live();
            let aopts = ApplyOptions {
                skip_unsupported: false,
                after_step: Some(&pause_hook),
            };
            apply::finish(&host, state, &aopts)?
        }
    };
    json_or_text(a.json, &r, |r| print_apply(r, "finished"))
}
