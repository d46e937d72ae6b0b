//! Colours of the terminal view: one stable colour per agent, used only on a terminal and only
//! when `NO_COLOR` is not set (whatever its value).

use troupe::store::events::RUN_AGENT;

/// The lead's colour: always bold cyan.
const LEAD: &str = "1;36";
/// The run itself (`troupe`): dim.
const RUN: &str = "2";
/// Teammates: picked by the name's hash, never the lead's cyan.
const PALETTE: [&str; 10] = ["32", "33", "35", "34", "91", "92", "93", "95", "94", "31"];

/// Whether a stream that is (or is not) a terminal gets colours.
pub fn colour_wanted(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none()
}

/// The SGR parameters of `agent`'s colour: the same name always gets the same colour.
pub fn agent_colour(agent: &str) -> &'static str {
    match agent {
        "lead" => LEAD,
        RUN_AGENT => RUN,
        _ => {
            // FNV-1a: stable across builds and platforms, unlike the std hasher's promise.
            let hash = agent.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            PALETTE[usize::try_from(hash % PALETTE.len() as u64).unwrap_or(0)]
        }
    }
}

/// `text` in `agent`'s colour when `colour`, else as it is.
pub fn paint(text: &str, agent: &str, colour: bool) -> String {
    if colour {
        format!("\x1b[{}m{text}\x1b[0m", agent_colour(agent))
    } else {
        text.to_owned()
    }
}

/// The agent column: the name padded to 8 characters, coloured when `colour`. A name read
/// from a stream is shown, never obeyed (its control characters escaped).
pub fn agent_column(agent: &str, colour: bool) -> String {
    let shown = troupe::terminal_text::line_for_terminal(agent);
    paint(&format!("{shown:<8}"), agent, colour)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stable_and_the_lead_has_its_own() {
        assert_eq!(agent_colour("lead"), LEAD);
        assert_eq!(agent_colour("writer"), agent_colour("writer"));
        for name in ["writer", "tester", "a", "reviewer-2", "x"] {
            assert_ne!(agent_colour(name), LEAD, "{name}");
        }
        assert_eq!(paint("lead", "lead", false), "lead");
        assert_eq!(paint("lead", "lead", true), "\x1b[1;36mlead\x1b[0m");
    }
}
