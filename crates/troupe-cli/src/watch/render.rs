//! The screen, drawn from a [`View`] and nothing else (tested on ratatui's `TestBackend`).
//!
//! ```text
//! troupe watch · run running · tokens 1200 in / 300 out · 1 plan pending
//!  lead · alice · bob                                   (every agent; the selected one marked)
//! ┌ lead running · thinking · 7/3 tok ┐┌ alice running · tool write_file · 100/20 tok ┐
//! │ last lines of its text…        ││ …                                        │
//! └────────────────────────────────┘└──────────────────────────────────────────┘
//! ┌ pending plans ─────────────────────────────────────────────────────────────┐
//! │ ▶ alice 0196c1d2 Write out.txt, then test it.                              │
//! └────────────────────────────────────────────────────────────────────────────┘
//!  Tab/←→ pane · PgUp/PgDn scroll · a approve · r reject · m message · q quit
//! ```
//!
//! As many agent panes side by side as fit ([`PANE_MIN_WIDTH`] columns each), the selected one
//! among them; colours only when `colour` (never under `NO_COLOR` or off a terminal).
//!
//! Everything the view holds came from a model, a tool, a server or the stores: each piece is
//! [`shown`] before it becomes a span, its control characters escaped. (ratatui would drop
//! them silently, leaving the rest of an escape sequence on screen as if it were text.)

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use troupe::terminal_text::line_for_terminal;

use super::state::{Activity, AgentPane, Input, RunState, View};
use crate::observe::style::agent_colour;

/// The narrowest an agent pane gets.
pub const PANE_MIN_WIDTH: u16 = 38;

/// At most this many plan requests are listed at once.
const PLAN_ROWS: usize = 4;

/// What frames the panes: the header's first words and the keys line.
pub struct Chrome {
    pub title: &'static str,
    pub help: &'static str,
}

/// `troupe watch`'s.
pub const WATCH: Chrome = Chrome {
    title: "troupe watch",
    help: "Tab/←→ pane · PgUp/PgDn scroll · a approve · r reject · m message · q quit",
};

pub fn draw(frame: &mut Frame, view: &View, colour: bool) {
    draw_in(frame, frame.area(), view, colour, &WATCH);
}

/// The view in `area` (a session keeps the rest of the screen for its prompt line).
pub fn draw_in(frame: &mut Frame, area: Rect, view: &View, colour: bool, chrome: &Chrome) {
    let plans = view.pending.len().min(PLAN_ROWS);
    let plan_height = if plans == 0 { 0 } else { plans as u16 + 2 };
    let [header, tabs, panes, plan_area, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(plan_height),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_line(view, chrome.title)), header);
    frame.render_widget(Paragraph::new(tab_line(view, colour)), tabs);
    draw_panes(frame, view, panes, colour);
    if plans > 0 {
        draw_plans(frame, view, plan_area, colour);
    }
    frame.render_widget(
        Paragraph::new(footer_line(view, colour, chrome.help)),
        footer,
    );
}

fn header_line(view: &View, title: &str) -> Line<'static> {
    let run = match &view.run {
        RunState::None => "no run yet".to_owned(),
        RunState::Running => "run running".to_owned(),
        RunState::Ended(how) => shown(how),
    };
    let (tokens_in, tokens_out) = view.total_tokens();
    let plans = match view.pending.len() {
        0 => String::new(),
        1 => " · 1 plan pending".to_owned(),
        n => format!(" · {n} plans pending"),
    };
    Line::from(format!(
        "{title} · {run} · tokens {tokens_in} in / {tokens_out} out{plans}"
    ))
    .style(Style::new().add_modifier(Modifier::BOLD))
}

fn tab_line(view: &View, colour: bool) -> Line<'static> {
    let mut spans = Vec::new();
    for (at, agent) in view.agents.iter().enumerate() {
        if at > 0 {
            spans.push(Span::raw(" · "));
        }
        let mut style = agent_style(&agent.name, colour);
        let label = if at == view.selected {
            style = style.add_modifier(Modifier::REVERSED);
            format!("[{}]", shown(&agent.name))
        } else {
            shown(&agent.name)
        };
        spans.push(Span::styled(label, style));
    }
    Line::from(spans)
}

/// The panes that fit, in roster order, in a window that holds the selected one.
fn draw_panes(frame: &mut Frame, view: &View, area: Rect, colour: bool) {
    let agents = view.agents.len();
    let shown = usize::from((area.width / PANE_MIN_WIDTH).max(1))
        .min(agents)
        .max(1);
    let first = view
        .selected
        .saturating_sub(shown - 1)
        .min(agents.saturating_sub(shown));
    let columns = Layout::horizontal(vec![Constraint::Ratio(1, shown as u32); shown]).split(area);
    for (column, agent_at) in columns.iter().zip(first..) {
        if let Some(agent) = view.agents.get(agent_at) {
            draw_pane(frame, agent, agent_at == view.selected, *column, colour);
        }
    }
}

fn draw_pane(frame: &mut Frame, agent: &AgentPane, selected: bool, area: Rect, colour: bool) {
    let activity = match &agent.activity {
        Activity::Idle => String::new(),
        Activity::Thinking => " · thinking".to_owned(),
        Activity::Tool(tool) => format!(" · tool {}", shown(tool)),
    };
    // The role last: in a narrow pane the title is cut at its end.
    let role = if agent.role.is_empty() || agent.role == agent.name {
        String::new()
    } else {
        format!(" · {}", shown(&agent.role))
    };
    let title = format!(
        " {} {}{activity} · {}/{} tok{role} ",
        shown(&agent.name),
        shown(&agent.status),
        agent.tokens_in,
        agent.tokens_out
    );
    let mut border = Style::new();
    if selected {
        border = border.add_modifier(Modifier::BOLD);
        if colour {
            border = border.fg(agent_colour_of(&agent.name));
        }
    }
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(Span::styled(title, agent_style(&agent.name, colour)));
    if agent.back > 0 {
        let newer = match agent.back {
            1 => " 1 newer line below · End follows ".to_owned(),
            n => format!(" {n} newer lines below · End follows "),
        };
        block = block.title_bottom(Line::from(newer).right_aligned());
    }
    let inner = block.inner(area);
    let (lines, skip) = last_lines(agent, inner);
    let body = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .scroll((skip, 0))
        .block(block);
    frame.render_widget(body, area);
}

/// The lines of `agent` that fill `inner` once wrapped, ending `agent.back` lines before its
/// newest, and how many wrapped rows of the first one to scroll past so that the last line
/// taken is at the bottom.
fn last_lines(agent: &AgentPane, inner: Rect) -> (Vec<Line<'static>>, u16) {
    let width = usize::from(inner.width.max(1));
    let height = usize::from(inner.height);
    let mut rows = 0;
    let mut taken = Vec::new();
    for line in agent.lines.iter().rev().skip(agent.back) {
        if rows >= height {
            break;
        }
        let line = shown(line);
        rows += line.chars().count().div_ceil(width).max(1);
        taken.push(Line::from(line));
    }
    taken.reverse();
    let skip = u16::try_from(rows.saturating_sub(height)).unwrap_or(u16::MAX);
    (taken, skip)
}

fn draw_plans(frame: &mut Frame, view: &View, area: Rect, colour: bool) {
    let current = view.current_plan().map(|p| p.request_id.as_str());
    let lines: Vec<Line<'static>> = view
        .pending
        .iter()
        .take(PLAN_ROWS)
        .map(|plan| {
            let here = Some(plan.request_id.as_str()) == current;
            let marker = if here { "▶ " } else { "  " };
            let id = crate::watch::team::short_request_id(&plan.request_id);
            let flat = plan.plan.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut line = Line::from(vec![
                Span::raw(marker),
                Span::styled(shown(&plan.from), agent_style(&plan.from, colour)),
                Span::raw(format!(" {} {}", shown(&id), shown(&flat))),
            ]);
            if here {
                line = line.style(Style::new().add_modifier(Modifier::BOLD));
            }
            line
        })
        .collect();
    let title = " pending plans: a approve · r reject ";
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

fn footer_line(view: &View, colour: bool, help: &str) -> Line<'static> {
    let prompt = match &view.input {
        Input::Message { to, text } => Some(format!(
            "message to {}: {}▏ (Enter sends, Esc cancels)",
            shown(to),
            shown(text)
        )),
        Input::Feedback { request_id, text } => {
            let id = crate::watch::team::short_request_id(request_id);
            Some(format!(
                "reject {}, feedback: {}▏ (Enter rejects, Esc cancels)",
                shown(&id),
                shown(text)
            ))
        }
        Input::Keys => None,
    };
    if let Some(prompt) = prompt {
        return Line::from(prompt).style(Style::new().add_modifier(Modifier::BOLD));
    }
    match &view.notice {
        Some(notice) => {
            let style = if colour {
                Style::new().fg(Color::Yellow)
            } else {
                Style::new().add_modifier(Modifier::BOLD)
            };
            Line::from(vec![
                Span::styled(shown(notice), style),
                Span::raw(format!(" │ {help}")),
            ])
        }
        None => Line::from(help.to_owned()),
    }
}

/// `text` as the view shows it: on one line, its control characters escaped, never obeyed.
fn shown(text: &str) -> String {
    line_for_terminal(text).into_owned()
}

/// The agent's colour when `colour`, else no style.
fn agent_style(agent: &str, colour: bool) -> Style {
    if colour {
        Style::new().fg(agent_colour_of(agent))
    } else {
        Style::new()
    }
}

/// The terminal view's colour of `agent` (the same as `troupe run`'s lines), as a ratatui colour.
fn agent_colour_of(agent: &str) -> Color {
    match agent_colour(agent) {
        "1;36" => Color::Cyan,
        "2" => Color::DarkGray,
        "32" => Color::Green,
        "33" => Color::Yellow,
        "35" => Color::Magenta,
        "34" => Color::Blue,
        "91" => Color::LightRed,
        "92" => Color::LightGreen,
        "93" => Color::LightYellow,
        "95" => Color::LightMagenta,
        "94" => Color::LightBlue,
        "31" => Color::Red,
        _ => Color::Reset,
    }
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::style::Color;
    use ratatui::Terminal;

    use super::super::state::tests::{a_team_at_work, event};
    use super::super::state::View;
    use super::*;

    fn drawn(view: &View, width: u16, height: u16, colour: bool) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, view, colour)).unwrap();
        terminal.backend().buffer().clone()
    }

    fn rows(buffer: &Buffer) -> Vec<String> {
        let area = buffer.area;
        (0..area.height)
            .map(|y| (0..area.width).map(|x| buffer[(x, y)].symbol()).collect())
            .collect()
    }

    fn has(rows: &[String], needle: &str) -> bool {
        rows.iter().any(|r| r.contains(needle))
    }

    fn with_bob(mut view: View) -> View {
        view.set_roster(&[
            ("alice".into(), "writer".into(), "running".into()),
            ("bob".into(), "tester".into(), "idle".into()),
        ]);
        view
    }

    #[test]
    fn in_80_by_24_the_selected_pane_plans_and_keys_fit() {
        let mut view = with_bob(a_team_at_work());
        view.selected = 1;
        let rows = rows(&drawn(&view, 80, 24, false));
        assert_eq!(rows.len(), 24);
        assert!(
            rows[0].starts_with(
                "troupe watch · run running · tokens 107 in / 23 out · 1 plan pending"
            ),
            "{rows:#?}"
        );
        assert!(rows[1].starts_with("lead · [alice] · bob"), "{rows:#?}");
        // Two panes side by side; alice's with her tool and last lines.
        assert!(has(&rows, "alice running · tool write_file"), "{rows:#?}");
        assert!(has(&rows, "First I plan."), "{rows:#?}");
        assert!(has(&rows, "Then I write."), "{rows:#?}");
        assert!(
            !has(&rows, "bob (tester)"),
            "bob's pane does not fit: {rows:#?}"
        );
        assert!(
            // The short id: the random end of the UUIDv7, not its time.
            has(&rows, "▶ alice 00000001 Write out.txt, then test it."),
            "{rows:#?}"
        );
        assert!(
            rows[23].starts_with(
                "Tab/←→ pane · PgUp/PgDn scroll · a approve · r reject · m message · q quit"
            ),
            "{rows:#?}"
        );
    }

    #[test]
    fn in_a_wide_terminal_every_agent_has_its_pane() {
        let view = with_bob(a_team_at_work());
        let rows = rows(&drawn(&view, 200, 50, false));
        for title in [
            "lead running · 7/3 tok",
            "alice running · tool write_file · 100/20 tok · writer",
            "bob idle · 0/0 tok · tester",
        ] {
            assert!(has(&rows, title), "{title}: {rows:#?}");
        }
    }

    #[test]
    fn the_newest_lines_stay_at_the_bottom_of_a_full_pane() {
        let mut view = View::default();
        for n in 1..=60 {
            view.agents[0].lines.push_back(format!("line {n}"));
        }
        let rows = rows(&drawn(&view, 80, 24, false));
        assert!(has(&rows, "line 60"), "{rows:#?}");
        assert!(!has(&rows, "line 1 "), "{rows:#?}");
    }

    #[test]
    fn a_pane_scrolled_back_shows_older_lines_and_says_how_many_are_below() {
        let mut view = View::default();
        for n in 1..=60 {
            view.agents[0].lines.push_back(format!("line {n}"));
        }
        view.agents[0].back = 30;
        let rows = rows(&drawn(&view, 80, 24, false));
        assert!(has(&rows, "line 30 "), "{rows:#?}");
        assert!(!has(&rows, "line 31"), "{rows:#?}");
        assert!(!has(&rows, "line 60"), "{rows:#?}");
        assert!(
            has(&rows, "30 newer lines below · End follows"),
            "{rows:#?}"
        );
        // Following again: the newest line at the bottom, no notice.
        view.agents[0].back = 0;
        let rows = self::rows(&drawn(&view, 80, 24, false));
        assert!(has(&rows, "line 60"), "{rows:#?}");
        assert!(!has(&rows, "newer line"), "{rows:#?}");
    }

    #[test]
    fn what_is_being_typed_replaces_the_keys_line() {
        let mut view = a_team_at_work();
        view.input = Input::Message {
            to: "alice".into(),
            text: "hello".into(),
        };
        let rows = rows(&drawn(&view, 80, 24, false));
        assert!(rows[23].starts_with("message to alice: hello"), "{rows:#?}");
    }

    #[test]
    fn escape_sequences_in_an_agents_text_are_shown_as_text_not_obeyed() {
        let mut view = a_team_at_work();
        view.apply(&event(
            20,
            "alice",
            troupe::store::events::kinds::ASSISTANT_TEXT,
            serde_json::json!({
                "text": "Done.\u{1b}[2K\rAll tests pass\u{1b}]0;owned\u{7} \u{9b}1A up"
            }),
        ));
        view.apply(&event(
            21,
            "alice",
            troupe::store::events::kinds::TOOL_STARTED,
            serde_json::json!({"tool": "write\u{1b}[1Afile", "call_id": "c1"}),
        ));
        let rows = rows(&drawn(&view, 200, 40, false));
        assert!(
            has(
                &rows,
                "Done.\\x1b[2K\\x0dAll tests pass\\x1b]0;owned\\x07 \\x9b1A up"
            ),
            "{rows:#?}"
        );
        assert!(has(&rows, "tool write\\x1b[1Afile"), "{rows:#?}");
        assert!(
            rows.iter().flat_map(|r| r.chars()).all(|c| !c.is_control()),
            "{rows:#?}"
        );
    }

    #[test]
    fn colours_only_when_asked() {
        let view = with_bob(a_team_at_work());
        let plain = drawn(&view, 80, 24, false);
        assert!(
            plain
                .content()
                .iter()
                .all(|c| c.fg == Color::Reset && c.bg == Color::Reset),
            "no colour without `colour`"
        );
        let coloured = drawn(&view, 80, 24, true);
        assert!(
            coloured.content().iter().any(|c| c.fg == Color::Cyan),
            "the lead's cyan"
        );
    }
}
