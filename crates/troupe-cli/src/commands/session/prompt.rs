//! The session's prompt line: what each key does to the text being typed, and what the front
//! end must do when a line is done. Pure, so every binding is tested without a terminal.
//!
//! | key | does |
//! |---|---|
//! | Enter | submit the line (a `/command`, a prompt, or a message to the lead while it works) |
//! | Alt-Enter, Ctrl-J | a new line in the prompt (pasted text keeps its lines) |
//! | ↑ / ↓ | recall an earlier prompt / a later one |
//! | Esc | clear the line |
//! | Ctrl-C | stop the current work; on an empty line with no work, twice, leave |
//! | Ctrl-D | on an empty line, leave |

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What a key asks of the front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing beyond the change of the line.
    None,
    /// A line is done.
    Submit(String),
    /// Stop the current work (Ctrl-C while the team works).
    Cancel,
    /// Tell the person (the first Ctrl-C on an empty line).
    Notice(String),
    /// Leave the session.
    Quit,
}

/// The line being typed, and the prompts typed before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// What is typed (may hold new lines).
    pub text: String,
    /// Earlier lines, oldest first.
    history: Vec<String>,
    /// Which of `history` is shown (↑/↓), if any.
    recalled: Option<usize>,
    /// The last key was Ctrl-C on an empty line with no work: another one leaves.
    armed: bool,
}

impl Prompt {
    pub fn with_history(history: Vec<String>) -> Self {
        Self {
            history,
            ..Self::default()
        }
    }

    /// Applies `key`; `working`: the team is at work (Ctrl-C stops it rather than leaving).
    pub fn press(&mut self, key: KeyEvent, working: bool) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let armed = std::mem::take(&mut self.armed);
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if working {
                    Action::Cancel
                } else if !self.text.is_empty() {
                    self.clear();
                    Action::None
                } else if armed {
                    Action::Quit
                } else {
                    self.armed = true;
                    Action::Notice("Ctrl-C again (or Ctrl-D, or /exit) leaves the session".into())
                }
            }
            KeyCode::Char('d') if ctrl => {
                if self.text.is_empty() {
                    Action::Quit
                } else {
                    Action::None
                }
            }
            KeyCode::Char('j') if ctrl => {
                self.text.push('\n');
                Action::None
            }
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => {
                self.text.push('\n');
                Action::None
            }
            KeyCode::Enter => {
                let line = std::mem::take(&mut self.text);
                self.recalled = None;
                if line.trim().is_empty() {
                    return Action::None;
                }
                if self.history.last() != Some(&line) {
                    self.history.push(line.clone());
                }
                Action::Submit(line)
            }
            KeyCode::Backspace => {
                self.text.pop();
                Action::None
            }
            KeyCode::Esc => {
                self.clear();
                Action::None
            }
            KeyCode::Up => {
                let at = match self.recalled {
                    Some(at) => at.saturating_sub(1),
                    None if self.history.is_empty() => return Action::None,
                    None => self.history.len() - 1,
                };
                self.recall(Some(at));
                Action::None
            }
            KeyCode::Down => {
                match self.recalled {
                    Some(at) if at + 1 < self.history.len() => self.recall(Some(at + 1)),
                    Some(_) => self.recall(None),
                    None => {}
                }
                Action::None
            }
            KeyCode::Char(c) if !ctrl => {
                self.text.push(c);
                Action::None
            }
            _ => Action::None,
        }
    }

    /// Pasted text, its lines kept.
    pub fn paste(&mut self, text: &str) {
        self.armed = false;
        self.text
            .push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
    }

    /// The prompts typed, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    fn clear(&mut self) {
        self.text.clear();
        self.recalled = None;
    }

    fn recall(&mut self, at: Option<usize>) {
        self.recalled = at;
        self.text = at
            .and_then(|at| self.history.get(at))
            .cloned()
            .unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn typed(prompt: &mut Prompt, text: &str) {
        for c in text.chars() {
            assert_eq!(prompt.press(key(KeyCode::Char(c)), false), Action::None);
        }
    }

    #[test]
    fn enter_submits_the_line_and_a_blank_one_is_not() {
        let mut prompt = Prompt::default();
        typed(&mut prompt, "hello");
        prompt.press(key(KeyCode::Backspace), false);
        assert_eq!(
            prompt.press(key(KeyCode::Enter), false),
            Action::Submit("hell".into())
        );
        assert_eq!(prompt.text, "");
        typed(&mut prompt, "  ");
        assert_eq!(prompt.press(key(KeyCode::Enter), false), Action::None);
    }

    #[test]
    fn alt_enter_ctrl_j_and_a_paste_keep_lines() {
        let mut prompt = Prompt::default();
        typed(&mut prompt, "one");
        prompt.press(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), false);
        typed(&mut prompt, "two");
        prompt.press(ctrl('j'), false);
        prompt.paste("three\r\nfour");
        assert_eq!(
            prompt.press(key(KeyCode::Enter), false),
            Action::Submit("one\ntwo\nthree\nfour".into())
        );
    }

    #[test]
    fn up_and_down_recall_earlier_prompts() {
        let mut prompt = Prompt::with_history(vec!["first".into()]);
        typed(&mut prompt, "second");
        prompt.press(key(KeyCode::Enter), false);
        prompt.press(key(KeyCode::Up), false);
        assert_eq!(prompt.text, "second");
        prompt.press(key(KeyCode::Up), false);
        prompt.press(key(KeyCode::Up), false);
        assert_eq!(prompt.text, "first");
        prompt.press(key(KeyCode::Down), false);
        assert_eq!(prompt.text, "second");
        prompt.press(key(KeyCode::Down), false);
        assert_eq!(prompt.text, "");
        assert_eq!(prompt.history(), ["first", "second"]);
    }

    #[test]
    fn ctrl_c_stops_work_clears_a_line_and_twice_on_an_empty_line_leaves() {
        let mut prompt = Prompt::default();
        assert_eq!(prompt.press(ctrl('c'), true), Action::Cancel);
        typed(&mut prompt, "half");
        assert_eq!(prompt.press(ctrl('c'), false), Action::None);
        assert_eq!(prompt.text, "");
        assert!(matches!(prompt.press(ctrl('c'), false), Action::Notice(_)));
        assert_eq!(prompt.press(ctrl('c'), false), Action::Quit);
        // Another key between the two disarms.
        assert!(matches!(prompt.press(ctrl('c'), false), Action::Notice(_)));
        typed(&mut prompt, "x");
        prompt.press(key(KeyCode::Esc), false);
        assert!(matches!(prompt.press(ctrl('c'), false), Action::Notice(_)));
    }

    #[test]
    fn ctrl_d_leaves_on_an_empty_line_only() {
        let mut prompt = Prompt::default();
        typed(&mut prompt, "x");
        assert_eq!(prompt.press(ctrl('d'), false), Action::None);
        prompt.press(key(KeyCode::Backspace), false);
        assert_eq!(prompt.press(ctrl('d'), true), Action::Quit);
    }
}
