//! Terminal setup and restore: raw mode and the alternate screen, undone on
//! every exit path — by [`TerminalGuard`]'s `Drop` (normal return, `?`
//! errors) and by a panic hook installed before the screen is switched (the
//! hook restores first, then prints the panic with the previous hook).

use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::{stdout, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set while the terminal is in raw mode / alternate screen.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Undo raw mode and the alternate screen (idempotent; safe from a panic hook).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    }
}

/// Owns the terminal while the TUI runs.
pub struct TerminalGuard {
    /// The ratatui terminal.
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    /// Enter raw mode and the alternate screen, with a panic hook that restores them.
    pub fn enter() -> std::io::Result<Self> {
        install_panic_hook();
        ACTIVE.store(true, Ordering::SeqCst);
        let setup = || -> std::io::Result<Terminal<CrosstermBackend<Stdout>>> {
            terminal::enable_raw_mode()?;
            execute!(stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
            Terminal::new(CrosstermBackend::new(stdout()))
        };
        match setup() {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn install_panic_hook() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}
