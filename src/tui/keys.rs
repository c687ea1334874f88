//! The key table: every key the TUI knows, the [`Action`] it sends and the
//! words the help popup and the footer show. One table, so the help can never
//! miss a key and key handling is testable without a terminal.

use super::action::Action;
use super::model::View;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// One binding of a key table (the main view's [`KEYMAP`] or the fleet view's).
#[derive(Debug, Clone)]
pub struct Binding<A = Action> {
    /// The key.
    pub code: KeyCode,
    /// Modifiers that must be held (SHIFT is ignored for characters).
    pub mods: KeyModifiers,
    /// What it does.
    pub action: A,
    /// How the help shows the key (bindings with the same text share a line).
    pub keys: &'static str,
    /// What the help says it does.
    pub help: &'static str,
}

pub(crate) const fn key<A>(
    code: KeyCode,
    mods: KeyModifiers,
    action: A,
    keys: &'static str,
    help: &'static str,
) -> Binding<A> {
    Binding {
        code,
        mods,
        action,
        keys,
        help,
    }
}

pub(crate) const N: KeyModifiers = KeyModifiers::NONE;
pub(crate) const C: KeyModifiers = KeyModifiers::CONTROL;

/// Every key binding, in the order the help lists them.
#[rustfmt::skip]
pub const KEYMAP: &[Binding] = &[
    key(KeyCode::Char('q'), N, Action::Quit, "q / Ctrl-C", "quit (stops a running test)"),
    key(KeyCode::Char('c'), C, Action::Quit, "q / Ctrl-C", "quit (stops a running test)"),
    key(KeyCode::Tab, N, Action::NextView, "Tab / Shift-Tab", "next / previous view"),
    key(KeyCode::BackTab, N, Action::PrevView, "Tab / Shift-Tab", "next / previous view"),
    key(KeyCode::Char('1'), N, Action::ShowView(View::Dashboard), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('2'), N, Action::ShowView(View::Cpu), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('3'), N, Action::ShowView(View::Queues), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('4'), N, Action::ShowView(View::Facts), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('5'), N, Action::ShowView(View::Findings), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('6'), N, Action::ShowView(View::Control), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('7'), N, Action::ShowView(View::Tune), "1-7", "dashboard, cpu, queues, facts, findings, control, tune"),
    key(KeyCode::Char('s'), N, Action::StartStop, "s", "start / stop a test (options: control view)"),
    key(KeyCode::Enter, N, Action::Confirm, "Enter", "control view: start the test; tune view: run the checklist"),
    key(KeyCode::Char('y'), N, Action::Answer(true), "y / n", "tune view: answer the checklist's question"),
    key(KeyCode::Char('n'), N, Action::Answer(false), "y / n", "tune view: answer the checklist's question"),
    key(KeyCode::Char('p'), N, Action::TogglePause, "p", "pause / resume the display (data is still recorded)"),
    key(KeyCode::Up, N, Action::Up, "Up / Down", "scroll; control and tune views: choose"),
    key(KeyCode::Down, N, Action::Down, "Up / Down", "scroll; control and tune views: choose"),
    key(KeyCode::PageUp, N, Action::PageUp, "PgUp / PgDn", "scroll a page"),
    key(KeyCode::PageDown, N, Action::PageDown, "PgUp / PgDn", "scroll a page"),
    key(KeyCode::Left, N, Action::Left, "Left / Right", "time cursor; control view: change the value"),
    key(KeyCode::Right, N, Action::Right, "Left / Right", "time cursor; control view: change the value"),
    key(KeyCode::Home, N, Action::Home, "Home / End", "first interval kept / newest (follow live)"),
    key(KeyCode::End, N, Action::End, "Home / End", "first interval kept / newest (follow live)"),
    key(KeyCode::Char('l'), N, Action::ToggleLog, "l", "start / stop recording the JSON-lines log (as run --log)"),
    key(KeyCode::Char('?'), N, Action::ToggleHelp, "?", "this help (any key closes it)"),
    key(KeyCode::Esc, N, Action::Close, "Esc", "close the help"),
];

impl<A> Binding<A> {
    /// Does this key event trigger the binding?
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        if ev.code != self.code {
            return false;
        }
        let held = ev.modifiers - KeyModifiers::SHIFT;
        match self.code {
            KeyCode::Char(_) | KeyCode::BackTab => held == self.mods,
            _ => ev.modifiers == self.mods,
        }
    }
}

/// The action a table binds to a key event (presses and repeats; releases do nothing).
pub fn action_in<A: Clone>(table: &[Binding<A>], ev: &KeyEvent) -> Option<A> {
    if ev.kind == KeyEventKind::Release {
        return None;
    }
    table
        .iter()
        .find(|b| b.matches(ev))
        .map(|b| b.action.clone())
}

/// A table's help entries: each distinct key text once, in table order.
pub fn help_in<A>(table: &[Binding<A>]) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for b in table {
        if !out.iter().any(|(k, _)| *k == b.keys) {
            out.push((b.keys, b.help));
        }
    }
    out
}

/// The action of a key event (presses and repeats; releases do nothing).
pub fn action_for(ev: &KeyEvent) -> Option<Action> {
    action_in(KEYMAP, ev)
}

/// Help lines: each distinct key text once, in table order.
pub fn help_lines() -> Vec<(&'static str, &'static str)> {
    help_in(KEYMAP)
}
