//! What `shell` keeps of a command's output, and how it tells the model (issue 23).
//!
//! [`ShellOutput`] takes every chunk the pipes give twice: into a [`CappedOutput`] (the head and
//! the tail the result shows, never more than the cap in memory) and, when the calling agent
//! has an artifact store, into an [`ArtifactStream`], which writes the output to a file as it is
//! read once it passes the cap (up to [`ARTIFACT_LIMIT_BYTES`]). Output under the cap is shown
//! as it always was. Output over it is shown as one line that says how many bytes the command
//! printed, how many the artifact holds and how many were dropped, then the first and last
//! [`EXCERPT_BYTES`] (a result that small stays in the conversation instead of becoming a second
//! artifact; without an artifact, the first and last half of the cap).

use super::read_file::MAX_READ_BYTES;
use crate::process::{CappedOutput, OutputSink, Pipe};
use crate::secrets::Redactor;
use crate::store::artifact_stream::{ArtifactStream, StreamEnd};
use crate::store::artifacts::ArtifactStore;

pub use crate::store::artifact_stream::ARTIFACT_LIMIT_BYTES;

/// With the output kept in an artifact, the result shows this many bytes of its start and as
/// many of its end (the size of the result budget's previews).
pub const EXCERPT_BYTES: usize = 2_000;

/// A command's combined output, capped for the result and streamed to an artifact.
pub struct ShellOutput {
    /// The head and tail the result shows.
    capped: CappedOutput,
    /// The whole output (to its limit), once it passes the cap; `None` without a store.
    artifact: Option<ArtifactStream>,
    /// The cap: output longer than this is cut.
    cap: usize,
    /// The most output bytes the artifact keeps.
    limit: u64,
}

impl ShellOutput {
    /// Output cut at `cap` bytes, without `redactor`'s secrets, kept in `artifacts` (when
    /// given) up to `limit` bytes once it is longer.
    pub fn new(
        cap: usize,
        redactor: &Redactor,
        artifacts: Option<ArtifactStore>,
        limit: u64,
    ) -> Self {
        Self {
            capped: CappedOutput::head_and_tail(cap).redacting(redactor.clone()),
            artifact: artifacts
                .map(|store| ArtifactStream::new(store, cap, redactor.clone()).with_limit(limit)),
            cap,
            limit,
        }
    }

    /// The most output bytes the artifact stream held in memory at once (0 without one).
    pub fn peak_pending(&self) -> usize {
        self.artifact
            .as_ref()
            .map_or(0, ArtifactStream::peak_pending)
    }

    /// The output as the result shows it, ending with a newline when not empty. Places the
    /// artifact (one `sync_all`, off the async threads).
    pub async fn render(self) -> String {
        let end = match self.artifact {
            Some(stream) => Some(stream.finish().await),
            None => None,
        };
        if !self.capped.is_cut() {
            return self.capped.render();
        }
        let total = self.capped.total() as u64;
        let shown = match &end {
            Some(StreamEnd::Kept { .. }) => EXCERPT_BYTES,
            _ => self.cap / 2,
        };
        let excerpt = self.capped.excerpt(shown, shown);
        let line = match end {
            Some(StreamEnd::Kept {
                artifact,
                kept,
                total,
            }) => kept_line(&artifact.relative_path, total, kept, self.limit),
            Some(StreamEnd::Lost { reason, total }) => lost_line(total, excerpt.omitted, &reason),
            // Cannot happen for a cut output (the stream starts past the same cap); said plainly.
            Some(StreamEnd::Small) => lost_line(total, excerpt.omitted, "it was not written"),
            None => lost_line(total, excerpt.omitted, "this agent keeps no artifacts"),
        };
        let mut text = format!(
            "{line}\n{}\n[… {} bytes not shown …]\n{}",
            excerpt.head, excerpt.omitted, excerpt.tail
        );
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

impl OutputSink for ShellOutput {
    fn push_from(&mut self, _pipe: Pipe, bytes: &[u8]) {
        self.capped.push(bytes);
        if let Some(artifact) = &mut self.artifact {
            artifact.push(bytes);
        }
    }
}

/// The first line of a cut output kept in an artifact: printed, kept, dropped, how to read it.
fn kept_line(path: &str, total: u64, kept: u64, limit: u64) -> String {
    let dropped = total.saturating_sub(kept);
    let held = if dropped == 0 {
        format!("all {kept} of them, 0 bytes dropped")
    } else {
        format!(
            "the first {kept} of them, {dropped} bytes dropped (an artifact keeps at most \
             {limit} bytes)"
        )
    };
    format!(
        "[Output truncated: the command printed {total} bytes; {path} holds {held}. read_file \
         opens it ({MAX_READ_BYTES} bytes at a time; `offset` skips lines, `limit` caps them); \
         shell tools (tail -c, grep, sed -n) read it too. Shown here: the start and the end of the \
         output.]"
    )
}

/// The first line of a cut output no artifact holds.
fn lost_line(total: u64, omitted: usize, reason: &str) -> String {
    let reason = reason.replace(['\n', '\r'], " ");
    format!(
        "[Output truncated: the command printed {total} bytes; no artifact holds them \
         ({reason}), so the {omitted} bytes not shown here were dropped.]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_states_printed_kept_and_dropped() {
        assert_eq!(
            kept_line(".troupe/artifacts/lead/a.txt", 500, 500, 1_000),
            format!(
                "[Output truncated: the command printed 500 bytes; .troupe/artifacts/lead/a.txt \
                 holds all 500 of them, 0 bytes dropped. read_file opens it \
                 ({MAX_READ_BYTES} bytes at a time; `offset` skips lines, `limit` caps them); \
                 shell tools (tail -c, grep, sed -n) read it too. Shown here: the start and the \
                 end of the output.]"
            )
        );
        assert!(kept_line("a", 500, 300, 300).contains(
            "holds the first 300 of them, 200 bytes dropped (an artifact keeps at most 300 bytes)"
        ));
        assert_eq!(
            lost_line(9, 4, "no\nspace"),
            "[Output truncated: the command printed 9 bytes; no artifact holds them (no space), \
             so the 4 bytes not shown here were dropped.]"
        );
    }
}
