//! The fleet view's keys: one table, the [`FleetAction`] each sends and the
//! words the footer shows, so the footer cannot miss a key and key handling
//! is testable without a terminal.

use super::super::keys::{key, Binding, C, N};
use super::model::FleetAction;
use crossterm::event::KeyCode;

/// Every key of the fleet view, in the order the footer lists them.
#[rustfmt::skip]
pub const FLEET_KEYS: &[Binding<FleetAction>] = &[
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
