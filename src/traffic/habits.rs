//! The options users of other tools (perftest, iperf3, ghz) type by habit,
//! as tables an engine declares ([`crate::traffic::EngineSlice::habits`]):
//! `cli::habits` refuses them before a test runs, with what to write
//! instead. An engine lists the letters its own users bring (perftest's
//! under `--engine rdma`) and the ones that mean "use this engine" under
//! any engine (iperf3's `-u` means the packet sink).

/// One letter wirescope refuses: it would misread it (perftest's `-t` is
/// the tx depth, wirescope's the test length) or does not have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Habit {
    /// The short option, without its dash.
    pub letter: char,
    /// Refused under every engine (true), or only in a test of the engine
    /// that declares it.
    pub anywhere: bool,
    /// The tool whose option it is.
    pub tool: &'static str,
    /// What it means there.
    pub meaning: &'static str,
    /// What to write instead.
    pub instead: &'static str,
}

/// One long option of such a tool that wirescope does not have; refused
/// under every engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHabit {
    /// The option, without its dashes.
    pub name: &'static str,
    /// Whose option it is and what it means there.
    pub what: &'static str,
    /// What to write instead.
    pub instead: &'static str,
}
