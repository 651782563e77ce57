//! `VKEXIT_TEGRA_MODE`: how faithfully the layer crashes at exit.

/// What the exit handler does after unmapping the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Waits (up to [`crate::exit_handler::FAULT_WAIT_NS`]) for a live worker to fault, so a
    /// device alive at exit crashes the process every time.
    Deterministic,
    /// Returns at once: the process may finish exiting before a worker wakes up and faults, so
    /// the crash is flaky, as on the Orin (3 of 5 unpatched runs exited 0).
    Racy,
    /// Pure pass-through: no region, no worker threads, no exit-time effect.
    Off,
}

/// The parsed mode, and the unknown value that fell back to the default, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModeChoice {
    /// The mode in force.
    pub mode: Mode,
    /// The value that was not understood, when the mode fell back.
    pub unknown: Option<String>,
}

impl Mode {
    /// The name written in evidence and accepted in `VKEXIT_TEGRA_MODE`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Deterministic => "deterministic",
            Mode::Racy => "racy",
            Mode::Off => "off",
        }
    }

    /// Parses the variable's value: unset or empty → deterministic; an unknown value →
    /// deterministic, remembered so that the layer records a warning.
    pub fn parse(value: Option<&str>) -> ModeChoice {
        let mode = match value.map(str::trim) {
            None | Some("") | Some("deterministic") => Mode::Deterministic,
            Some("racy") => Mode::Racy,
            Some("off") => Mode::Off,
            Some(other) => {
                return ModeChoice {
                    mode: Mode::Deterministic,
                    unknown: Some(other.to_owned()),
                }
            }
        };
        ModeChoice {
            mode,
            unknown: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_deterministic() {
        assert_eq!(Mode::parse(None).mode, Mode::Deterministic);
        assert_eq!(Mode::parse(Some("")).mode, Mode::Deterministic);
        assert_eq!(Mode::parse(Some("deterministic")).unknown, None);
    }

    #[test]
    fn known_modes_round_trip_their_names() {
        for mode in [Mode::Deterministic, Mode::Racy, Mode::Off] {
            assert_eq!(Mode::parse(Some(mode.name())).mode, mode);
        }
        assert_eq!(Mode::parse(Some(" racy\n")).mode, Mode::Racy);
    }

    #[test]
    fn unknown_value_falls_back_to_deterministic_and_is_kept() {
        let choice = Mode::parse(Some("flaky"));
        assert_eq!(choice.mode, Mode::Deterministic);
        assert_eq!(choice.unknown.as_deref(), Some("flaky"));
    }
}
