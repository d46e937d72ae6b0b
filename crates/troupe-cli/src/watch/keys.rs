//! What a key does: a change of the [`View`] (selection, typing) and, for some keys, an
//! [`Effect`] for the runner to carry out (quit, answer a plan, send a message). Pure, so every
//! binding is tested without a terminal.
//!
//! | key | does |
//! |---|---|
//! | Tab, →, ↓ / Shift-Tab, ←, ↑ | next / previous pane |
//! | PgUp / PgDn | scroll the selected pane back / forward [`SCROLL_STEP`] lines |
//! | Home / End | its oldest kept line / its newest (and follow new lines again) |
//! | `a` | approve the current plan request (the selected agent's, else the oldest) |
//! | `r` | reject it: type the feedback (may be empty), Enter sends, Esc cancels |
//! | `m`, Enter | type a message to the selected agent: Enter sends, Esc cancels |
//! | `q`, Ctrl-C | quit |

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::state::{Effect, Input, View};

/// Applies `key` to `view`; returns what the runner must do, if anything.
pub fn press(view: &mut View, key: KeyEvent) -> Option<Effect> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Effect::Quit);
    }
    match &mut view.input {
        Input::Keys => command(view, key.code),
        Input::Message { text, .. } | Input::Feedback { text, .. } => match key.code {
            KeyCode::Esc => {
                view.input = Input::Keys;
                None
            }
            KeyCode::Backspace => {
                text.pop();
                None
            }
            KeyCode::Char(c) => {
                text.push(c);
                None
            }
            KeyCode::Enter => submit(view),
            _ => None,
        },
    }
}

/// How many lines PgUp and PgDn move the selected pane.
pub const SCROLL_STEP: usize = 10;

/// A key while no text is being typed.
fn command(view: &mut View, code: KeyCode) -> Option<Effect> {
    match code {
        KeyCode::Char('q') => return Some(Effect::Quit),
        KeyCode::Tab | KeyCode::Right | KeyCode::Down => view.select_next(),
        KeyCode::BackTab | KeyCode::Left | KeyCode::Up => view.select_previous(),
        KeyCode::PageUp | KeyCode::PageDown | KeyCode::Home | KeyCode::End => {
            if let Some(pane) = view.selected_pane() {
                match code {
                    KeyCode::PageUp => pane.scroll_back(SCROLL_STEP),
                    KeyCode::PageDown => pane.scroll_forward(SCROLL_STEP),
                    KeyCode::Home => pane.scroll_back(usize::MAX),
                    _ => pane.scroll_forward(usize::MAX),
                }
            }
        }
        KeyCode::Char('a') => {
            return match view.current_plan() {
                Some(plan) => Some(Effect::Answer {
                    request_id: plan.request_id.clone(),
                    approve: true,
                    feedback: None,
                }),
                None => {
                    view.notice = Some("no pending plan request to approve".into());
                    None
                }
            };
        }
        KeyCode::Char('r') => match view.current_plan() {
            Some(plan) => {
                view.input = Input::Feedback {
                    request_id: plan.request_id.clone(),
                    text: String::new(),
                };
            }
            None => view.notice = Some("no pending plan request to reject".into()),
        },
        KeyCode::Char('m') | KeyCode::Enter => {
            if let Some(agent) = view.agents.get(view.selected) {
                view.input = Input::Message {
                    to: agent.name.clone(),
                    text: String::new(),
                };
            }
        }
        _ => {}
    }
    None
}

/// Enter while typing: the message or the rejection goes (a blank message does not).
fn submit(view: &mut View) -> Option<Effect> {
    match std::mem::replace(&mut view.input, Input::Keys) {
        Input::Keys => None,
        Input::Message { to, text } => {
            if text.trim().is_empty() {
                view.notice = Some("a blank message is not sent".into());
                return None;
            }
            Some(Effect::Send { to, text })
        }
        Input::Feedback { request_id, text } => Some(Effect::Answer {
            request_id,
            approve: false,
            feedback: (!text.trim().is_empty()).then_some(text),
        }),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::super::state::PendingPlan;
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(view: &mut View, text: &str) {
        for c in text.chars() {
            assert_eq!(press(view, key(KeyCode::Char(c))), None);
        }
    }

    fn team_with_plans() -> View {
        let mut view = View::default();
        view.set_roster(&[
            ("alice".into(), "writer".into(), "running".into()),
            ("bob".into(), "tester".into(), "idle".into()),
        ]);
        view.set_pending(vec![
            PendingPlan {
                request_id: "r-alice".into(),
                from: "alice".into(),
                plan: "write".into(),
            },
            PendingPlan {
                request_id: "r-bob".into(),
                from: "bob".into(),
                plan: "test".into(),
            },
        ]);
        view
    }

    #[test]
    fn tab_and_arrows_move_between_panes_and_wrap() {
        let mut view = team_with_plans();
        press(&mut view, key(KeyCode::Tab));
        assert_eq!(view.selected, 1);
        press(&mut view, key(KeyCode::Right));
        press(&mut view, key(KeyCode::Down));
        assert_eq!(view.selected, 0, "wrapped past bob");
        press(&mut view, key(KeyCode::Up));
        assert_eq!(view.selected, 2);
        press(&mut view, key(KeyCode::BackTab));
        press(&mut view, key(KeyCode::Left));
        assert_eq!(view.selected, 0);
    }

    #[test]
    fn a_approves_the_selected_agent_s_plan_else_the_oldest() {
        let mut view = team_with_plans();
        let approve = |id: &str| Effect::Answer {
            request_id: id.into(),
            approve: true,
            feedback: None,
        };
        assert_eq!(
            press(&mut view, key(KeyCode::Char('a'))),
            Some(approve("r-alice"))
        );
        view.selected = 2;
        assert_eq!(
            press(&mut view, key(KeyCode::Char('a'))),
            Some(approve("r-bob"))
        );
        view.set_pending(Vec::new());
        assert_eq!(press(&mut view, key(KeyCode::Char('a'))), None);
        assert_eq!(
            view.notice.as_deref(),
            Some("no pending plan request to approve")
        );
    }

    #[test]
    fn r_takes_feedback_then_rejects_and_esc_cancels() {
        let mut view = team_with_plans();
        view.selected = 2;
        press(&mut view, key(KeyCode::Char('r')));
        typed(&mut view, "more tests");
        press(&mut view, key(KeyCode::Backspace));
        assert_eq!(
            press(&mut view, key(KeyCode::Enter)),
            Some(Effect::Answer {
                request_id: "r-bob".into(),
                approve: false,
                feedback: Some("more test".into()),
            })
        );
        assert_eq!(view.input, Input::Keys);
        // `q` typed into the feedback is text, not quit; Esc leaves without answering.
        press(&mut view, key(KeyCode::Char('r')));
        typed(&mut view, "q");
        assert_eq!(press(&mut view, key(KeyCode::Esc)), None);
        assert_eq!(view.input, Input::Keys);
    }

    #[test]
    fn m_sends_a_message_to_the_selected_agent_but_not_a_blank_one() {
        let mut view = team_with_plans();
        press(&mut view, key(KeyCode::Tab));
        press(&mut view, key(KeyCode::Char('m')));
        typed(&mut view, "hi alice");
        assert_eq!(
            press(&mut view, key(KeyCode::Enter)),
            Some(Effect::Send {
                to: "alice".into(),
                text: "hi alice".into()
            })
        );
        press(&mut view, key(KeyCode::Enter));
        typed(&mut view, "  ");
        assert_eq!(press(&mut view, key(KeyCode::Enter)), None);
        assert_eq!(view.notice.as_deref(), Some("a blank message is not sent"));
    }

    #[test]
    fn q_and_ctrl_c_quit_even_while_typing_for_ctrl_c() {
        let mut view = View::default();
        assert_eq!(
            press(&mut view, key(KeyCode::Char('q'))),
            Some(Effect::Quit)
        );
        press(&mut view, key(KeyCode::Char('m')));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(press(&mut view, ctrl_c), Some(Effect::Quit));
    }

    #[test]
    fn page_keys_scroll_the_selected_pane_and_end_follows_again() {
        let mut view = View::default();
        for n in 0..50 {
            view.agents[0].lines.push_back(format!("line {n}"));
        }
        assert_eq!(press(&mut view, key(KeyCode::PageUp)), None);
        assert_eq!(view.agents[0].back, SCROLL_STEP);
        press(&mut view, key(KeyCode::PageUp));
        press(&mut view, key(KeyCode::PageDown));
        assert_eq!(view.agents[0].back, SCROLL_STEP);
        press(&mut view, key(KeyCode::Home));
        assert_eq!(view.agents[0].back, 49);
        press(&mut view, key(KeyCode::End));
        assert_eq!(view.agents[0].back, 0);
        press(&mut view, key(KeyCode::PageDown));
        assert_eq!(view.agents[0].back, 0);
    }
}
