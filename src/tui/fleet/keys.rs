//! The fleet view's keys: one table, the [`FleetAction`] each sends and the
//! words the footer shows, so the footer cannot miss a key and key handling
//! is testable without a terminal.

use super::model::FleetAction;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// One binding.
#[derive(Debug, Clone)]
pub struct FleetKey {
    /// The key.
    pub code: KeyCode,
    /// Modifiers that must be held (SHIFT is ignored for characters).
    pub mods: KeyModifiers,
    /// What it does.
    pub action: FleetAction,
    /// How the footer shows the key (bindings with the same text share one entry).
    pub keys: &'static str,
    /// What the footer says it does.
    pub help: &'static str,
}

const fn key(
    code: KeyCode,
    mods: KeyModifiers,
    action: FleetAction,
    keys: &'static str,
    help: &'static str,
) -> FleetKey {
    FleetKey {
        code,
        mods,
        action,
        keys,
        help,
    }
}

const N: KeyModifiers = KeyModifiers::NONE;
const C: KeyModifiers = KeyModifiers::CONTROL;

/// Every key of the fleet view, in the order the footer lists them.
#[rustfmt::skip]
pub const FLEET_KEYS: &[FleetKey] = &[
    key(KeyCode::Char('q'), N, FleetAction::Quit, "q", "quit"),
    key(KeyCode::Char('c'), C, FleetAction::Interrupt, "^C", "stop"),
    key(KeyCode::Up, N, FleetAction::Up, "↑↓←→", "move"),
    key(KeyCode::Down, N, FleetAction::Down, "↑↓←→", "move"),
    key(KeyCode::Left, N, FleetAction::Left, "↑↓←→", "move"),
    key(KeyCode::Right, N, FleetAction::Right, "↑↓←→", "move"),
    key(KeyCode::Enter, N, FleetAction::Open, "Enter", "details"),
    key(KeyCode::Esc, N, FleetAction::Back, "Esc", "back"),
    key(KeyCode::PageUp, N, FleetAction::PageUp, "PgUp/Dn", "page"),
    key(KeyCode::PageDown, N, FleetAction::PageDown, "PgUp/Dn", "page"),
    key(KeyCode::Home, N, FleetAction::Home, "Home/End", "ends"),
    key(KeyCode::End, N, FleetAction::End, "Home/End", "ends"),
];

impl FleetKey {
    /// Does this key event trigger the binding?
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        if ev.code != self.code {
            return false;
        }
        match self.code {
            KeyCode::Char(_) => ev.modifiers - KeyModifiers::SHIFT == self.mods,
            _ => ev.modifiers == self.mods,
        }
    }
}

/// The action of a key event (presses and repeats; releases do nothing).
pub fn action_for(ev: &KeyEvent) -> Option<FleetAction> {
    if ev.kind == KeyEventKind::Release {
        return None;
    }
    FLEET_KEYS
        .iter()
        .find(|b| b.matches(ev))
        .map(|b| b.action.clone())
}

/// Footer entries: each distinct key text once, in table order.
pub fn footer_entries() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for b in FLEET_KEYS {
        if !out.iter().any(|(k, _)| *k == b.keys) {
            out.push((b.keys, b.help));
        }
    }
    out
}
