//! The session's `/commands`, parsed from a submitted line. Pure.

/// What a line starting with `/` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    Help,
    Exit,
    /// A fresh lead conversation from the next prompt on.
    New,
    /// The usage table of `troupe usage`.
    Cost,
    /// The team's status, as `troupe status`.
    Status,
    /// The task board, as `troupe tasks`.
    Tasks,
    /// Compact an agent's conversation now (the lead's when none is named).
    Compact(Option<String>),
    /// Approve the current plan request (the selected agent's, else the oldest).
    Approve,
    /// Reject it, with the feedback if any.
    Reject(Option<String>),
    /// `/send AGENT TEXT`: a message from the person to any agent.
    Send {
        agent: String,
        text: String,
    },
}

/// What `/help` shows.
pub const HELP: &[&str] = &[
    "Enter sends the line to the lead (a new prompt; while the team works, a message to the lead)",
    "Alt-Enter or Ctrl-J: a new line · ↑/↓: earlier prompts · Tab: next pane · PgUp/PgDn: scroll",
    "Ctrl-C: stop the current work (the session stays) · Ctrl-C twice on an empty line, Ctrl-D: leave",
    "/send AGENT TEXT  a message from you to any agent",
    "a permission ask: y once · a always this session · s save the rule · n deny (type why, Enter)",
    "/approve          approve the current plan · /reject [FEEDBACK]  reject it",
    "/new              the next prompt starts the lead on a fresh conversation",
    "/cost             tokens and estimated cost per agent (troupe usage)",
    "/status · /tasks  the team's status, the task board · /compact [AGENT]  compact a conversation",
    "/help             this list · /exit  leave the session",
];

/// `line` as a command; `Err` says what is wrong with it.
pub fn parse(line: &str) -> Result<SlashCommand, String> {
    let line = line.trim();
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let bare = |command: SlashCommand| {
        if rest.is_empty() {
            Ok(command)
        } else {
            Err(format!("{name} takes no arguments"))
        }
    };
    match name {
        "/help" | "/?" => bare(SlashCommand::Help),
        "/exit" | "/quit" => bare(SlashCommand::Exit),
        "/new" => bare(SlashCommand::New),
        "/cost" => bare(SlashCommand::Cost),
        "/status" => bare(SlashCommand::Status),
        "/tasks" => bare(SlashCommand::Tasks),
        "/compact" => Ok(SlashCommand::Compact(
            (!rest.is_empty()).then(|| rest.to_owned()),
        )),
        "/approve" => bare(SlashCommand::Approve),
        "/reject" => Ok(SlashCommand::Reject(
            (!rest.is_empty()).then(|| rest.to_owned()),
        )),
        "/send" => {
            let (agent, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if agent.is_empty() || text.trim().is_empty() {
                return Err("usage: /send AGENT TEXT".into());
            }
            Ok(SlashCommand::Send {
                agent: agent.to_owned(),
                text: text.trim().to_owned(),
            })
        }
        _ => Err(format!("unknown command {name}; /help lists them")),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(parse("/help"), Ok(SlashCommand::Help));
        assert_eq!(parse(" /exit "), Ok(SlashCommand::Exit));
        assert_eq!(parse("/cost"), Ok(SlashCommand::Cost));
        assert_eq!(parse("/new"), Ok(SlashCommand::New));
        assert_eq!(parse("/approve"), Ok(SlashCommand::Approve));
        assert_eq!(parse("/status"), Ok(SlashCommand::Status));
        assert_eq!(parse("/tasks"), Ok(SlashCommand::Tasks));
        assert_eq!(parse("/compact"), Ok(SlashCommand::Compact(None)));
        assert_eq!(
            parse("/compact alice"),
            Ok(SlashCommand::Compact(Some("alice".into())))
        );
        assert_eq!(parse("/reject"), Ok(SlashCommand::Reject(None)));
        assert_eq!(
            parse("/reject more tests"),
            Ok(SlashCommand::Reject(Some("more tests".into())))
        );
        assert_eq!(
            parse("/send alice  hi there"),
            Ok(SlashCommand::Send {
                agent: "alice".into(),
                text: "hi there".into()
            })
        );
        assert_eq!(parse("/send alice"), Err("usage: /send AGENT TEXT".into()));
        assert_eq!(parse("/exit now"), Err("/exit takes no arguments".into()));
        assert_eq!(
            parse("/frobnicate"),
            Err("unknown command /frobnicate; /help lists them".into())
        );
    }
}
