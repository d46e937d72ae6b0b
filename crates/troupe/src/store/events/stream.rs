//! A team's event stream read back, on either backend: the port [`EventStream`], for the
//! commands that look at a team without running it (`troupe log`, `timeline`, `serve`, `watch`).
//!
//! Positions: an event's `seq` is its position in the team's stream. On files that is the
//! `seq` the run wrote in `.troupe/events.jsonl`; a shared team's stream numbers every process's
//! events in the team's order ([`crate::store::postgres::events::PgEvents`]).
//!
//! Two ways to read, because they cost differently on files:
//! - [`EventStream::after`] and [`EventStream::before`] go straight to any position. On files
//!   they use the stream's index (`.troupe/events.idx`, see [`super::index`]), which the adapter
//!   opens — creating or catching it up — on the first such call: only `troupe serve` asks for
//!   them.
//! - [`EventStream::reader`] reads on from a position, batch by batch, and writes nothing: a
//!   file's reader starts at the index's offset for the position once the index is open, else
//!   it reads the file from its start and skips what comes before the position.
//!
//! On files the stream is its closed segments (`.troupe/events/`, see [`super::segments`])
//! followed by the open one (`events.jsonl`): reads by position take older events from the
//! closed segments (decompressed on demand, the last one read kept when small) and newer ones
//! through the index, which covers the open segment only; a reader reads the closed segments
//! it has not read, then the open one, and when a roll replaces the open one it lists the
//! closed segments again and goes on after the last `seq` it returned — nothing lost, nothing
//! twice.
//!
//! [`EventStream::on_change`] wakes a reader when the stream may have grown: the kernel's file
//! watch on `.troupe/` (the workspace is watched until `.troupe/` appears, and again when it is
//! replaced), or a shared team's `NOTIFY`s. Never a timer. A wakeup may come with nothing new.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use troupe_wire::Event;

use super::follow::{watch_file, FileWatch, FollowError};
use super::index::{EventIndex, IndexedLine};
use super::read::last_seq;
use super::segments::read::{Keep, SegmentCache};
use super::segments::{self, Closed};
use super::EventLogError;
use crate::layout::Layout;
use crate::store::PortError;

mod file_reader;

/// What a wakeup calls: `false` asks for no more (a reader that has gone).
pub type OnChange = Arc<dyn Fn() -> bool + Send + Sync>;

/// Keeps [`EventStream::on_change`]'s wakeups coming; dropping it stops them.
/// (Held in a mutex only so that it can be shared: it is never locked.)
pub struct Watching(#[allow(dead_code)] Mutex<Box<dyn Send>>);

impl Watching {
    /// Wakeups kept alive by `keep` (a watch, a listener's guard).
    pub fn new(keep: impl Send + 'static) -> Self {
        Self(Mutex::new(Box::new(keep)))
    }
}

impl std::fmt::Debug for Watching {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watching")
    }
}

/// A team's event stream, read. See the module for positions and costs.
#[async_trait::async_trait]
pub trait EventStream: Send + Sync {
    /// Up to `limit` events after position `after`, oldest first.
    async fn after(&self, after: u64, limit: usize) -> Result<Vec<Event>, PortError>;
    /// Up to `limit` events before position `before` — the latest of them — oldest first.
    async fn before(&self, before: u64, limit: usize) -> Result<Vec<Event>, PortError>;
    /// The position of the stream's last event now (0 when it has none).
    async fn last(&self) -> Result<u64, PortError>;
    /// A reader of every event after position `after`, and of every later one as it comes.
    async fn reader(&self, after: u64) -> Result<Box<dyn EventReader>, PortError>;
    /// Calls `changed` whenever the stream may have grown, until the returned value is dropped
    /// (or, on a database, `changed` returns false). Starts before it returns, so a read after
    /// it misses nothing. Must be called inside a Tokio runtime.
    fn on_change(&self, changed: OnChange) -> Result<Watching, PortError>;
}

/// Reads a stream on from where it stopped.
#[async_trait::async_trait]
pub trait EventReader: Send {
    /// The next events not read yet (empty when there are none now). A file's reader reads
    /// about `bytes` of it at most; a database's reader a bounded number of rows.
    async fn next_batch(&mut self, bytes: usize) -> Result<Vec<Event>, PortError>;
}

/// A file's error as the port's: the file system's own, or `storage_error` for a stream
/// troupe cannot read back.
fn port(e: EventLogError) -> PortError {
    match e {
        EventLogError::Io(io) => PortError::Io(io),
        corrupt @ EventLogError::Corrupt { .. } => storage(corrupt.to_string()),
    }
}

fn storage(message: String) -> PortError {
    PortError::Backend(crate::store::BackendError::new("storage_error", message))
}

/// How many times a read by position starts again because a roll moved lines meanwhile.
const ROLL_RETRIES: usize = 3;

/// The workspace's `.troupe/events.jsonl` and its closed segments. Opening it touches nothing.
pub struct FileEvents {
    layout: Layout,
    /// The stream's index, once [`EventStream::after`] or [`EventStream::before`] opened it.
    index: Mutex<Option<EventIndex>>,
    /// The closed segment read last by position (pages of history come one after another).
    closed: Mutex<SegmentCache>,
}

impl FileEvents {
    pub fn new(layout: &Layout) -> Self {
        Self {
            layout: layout.clone(),
            index: Mutex::new(None),
            closed: Mutex::new(SegmentCache::default()),
        }
    }

    /// Runs `read` over the closed segments as listed, again when a roll closed more lines
    /// meanwhile (a read across that move could miss the lines moved).
    fn settled<R>(&self, read: impl Fn(&Closed) -> Result<R, PortError>) -> Result<R, PortError> {
        let mut closed = segments::closed(&self.layout).map_err(port)?;
        for _ in 0..ROLL_RETRIES {
            let out = read(&closed)?;
            let now = segments::closed(&self.layout).map_err(port)?;
            if now.through == closed.through {
                return Ok(out);
            }
            closed = now;
        }
        read(&closed)
    }

    /// Up to `limit` events after `after`: from the closed segments, then the open one.
    fn after_in(&self, closed: &Closed, after: u64, limit: usize) -> Result<Vec<Event>, PortError> {
        let mut out = Vec::new();
        let mut cache = crate::sync::lock(&self.closed);
        for segment in closed.segments.iter().filter(|s| s.last > after) {
            let want = limit.saturating_sub(out.len());
            if want == 0 {
                return Ok(out);
            }
            let lines = cache
                .range(
                    segment,
                    after.saturating_add(1),
                    u64::MAX,
                    Keep::First(want),
                )
                .map_err(port)?;
            out.extend(parsed(lines)?);
        }
        drop(cache);
        let want = limit.saturating_sub(out.len());
        if want > 0 {
            let from_seq = after.max(closed.through).saturating_add(1);
            let open = self.with_index(|index| {
                let from = index.position(from_seq).map_err(port)?;
                Self::lines(index, from, from.saturating_add(want as u64))
            })?;
            out.extend(open.unwrap_or_default());
        }
        Ok(out)
    }

    /// Up to `limit` events before `before` — the latest of them — oldest first: from the open
    /// segment, then back through the closed ones.
    fn before_in(
        &self,
        closed: &Closed,
        before: u64,
        limit: usize,
    ) -> Result<Vec<Event>, PortError> {
        let open = self
            .with_index(|index| {
                let low = index
                    .position(closed.through.saturating_add(1))
                    .map_err(port)?;
                let to = index.position(before).map_err(port)?.max(low);
                Self::lines(index, to.saturating_sub(limit as u64).max(low), to)
            })?
            .unwrap_or_default();
        let mut have = open.len();
        let mut parts = vec![open];
        let mut cache = crate::sync::lock(&self.closed);
        for segment in closed.segments.iter().rev().filter(|s| s.first < before) {
            let want = limit.saturating_sub(have);
            if want == 0 {
                break;
            }
            let lines = cache
                .range(segment, 0, before, Keep::Last(want))
                .map_err(port)?;
            have += lines.len();
            parts.push(parsed(lines)?);
        }
        parts.reverse();
        Ok(parts.concat())
    }

    /// Runs `f` on the index, opened (or caught up with the stream's complete lines) first;
    /// `None` while there is no stream.
    fn with_index<R>(
        &self,
        f: impl FnOnce(&mut EventIndex) -> Result<R, PortError>,
    ) -> Result<Option<R>, PortError> {
        let mut slot = crate::sync::lock(&self.index);
        match slot.as_mut() {
            Some(index) => index.catch_up().map_err(port)?,
            None => {
                if !self.layout.events_log().exists() {
                    return Ok(None);
                }
                *slot = Some(
                    EventIndex::open(&self.layout.events_log(), &self.layout.events_index())
                        .map_err(port)?,
                );
            }
        }
        match slot.as_mut() {
            Some(index) => f(index).map(Some),
            None => Ok(None),
        }
    }

    /// Lines `from..to` of the indexed stream, as events.
    fn lines(index: &mut EventIndex, from: u64, to: u64) -> Result<Vec<Event>, PortError> {
        parsed(index.lines(from, to).map_err(port)?)
    }

    /// Where a reader of every event after `after` may start in the open segment: the
    /// index's offset for it, with the identity of the file it is an offset of, when the
    /// index is open.
    fn start_of(&self, after: u64) -> Result<Option<file_reader::Start>, EventLogError> {
        let mut slot = crate::sync::lock(&self.index);
        let Some(index) = slot.as_mut() else {
            return Ok(None);
        };
        index.catch_up()?;
        let Some(identity) = index.stream_identity() else {
            return Ok(None);
        };
        let at = index.position(after.saturating_add(1))?;
        let offset = if at < index.len() {
            index.entry(at)?.offset
        } else {
            index.indexed_to()
        };
        Ok(Some(file_reader::Start { identity, offset }))
    }
}

/// Lines read back, as events.
fn parsed(lines: Vec<IndexedLine>) -> Result<Vec<Event>, PortError> {
    lines
        .into_iter()
        .map(|line| {
            Event::parse_line(&line.text).map_err(|e| {
                storage(format!(
                    "event {} of the stream is not an event: {e}",
                    line.seq
                ))
            })
        })
        .collect()
}

#[async_trait::async_trait]
impl EventStream for FileEvents {
    async fn after(&self, after: u64, limit: usize) -> Result<Vec<Event>, PortError> {
        crate::sync::blocking(|| self.settled(|closed| self.after_in(closed, after, limit)))
    }

    async fn before(&self, before: u64, limit: usize) -> Result<Vec<Event>, PortError> {
        crate::sync::blocking(|| self.settled(|closed| self.before_in(closed, before, limit)))
    }

    async fn last(&self) -> Result<u64, PortError> {
        crate::sync::blocking(|| {
            let open = last_seq(&self.layout.events_log())?;
            Ok(open.max(segments::closed_through(&self.layout)?))
        })
        .map_err(port)
    }

    async fn reader(&self, after: u64) -> Result<Box<dyn EventReader>, PortError> {
        let start = crate::sync::blocking(|| self.start_of(after)).map_err(port)?;
        Ok(Box::new(file_reader::FileReader::new(
            &self.layout,
            after,
            start,
        )))
    }

    fn on_change(&self, changed: OnChange) -> Result<Watching, PortError> {
        StateWatch::start(&self.layout, changed)
            .map(Watching::new)
            .map_err(|e| storage(e.to_string()))
    }
}

/// The file watches behind [`FileEvents::on_change`]: `.troupe` seen from the workspace (its
/// creation, or its replacement — then the old folder's watch is dead and a new one is
/// started), and the events file in it once the folder exists.
struct StateWatch {
    _state_dir: FileWatch,
    _events: Arc<Mutex<Option<FileWatch>>>,
}

impl StateWatch {
    fn start(layout: &Layout, changed: OnChange) -> Result<Self, FollowError> {
        let events_file: PathBuf = layout.events_log();
        let events: Arc<Mutex<Option<FileWatch>>> = Arc::default();
        let ensure = {
            let events = events.clone();
            let changed = changed.clone();
            move |renew: bool| ensure_events_watch(&events_file, &events, &changed, renew)
        };
        let state_dir = watch_file(&layout.state_dir(), {
            let ensure = ensure.clone();
            move || {
                ensure(true);
                changed();
            }
        })?;
        ensure(false);
        Ok(Self {
            _state_dir: state_dir,
            _events: events,
        })
    }
}

/// Starts watching the events file once its folder exists (again, when `renew`).
fn ensure_events_watch(
    events_file: &Path,
    slot: &Mutex<Option<FileWatch>>,
    changed: &OnChange,
    renew: bool,
) {
    let mut slot = crate::sync::lock(slot);
    if renew {
        *slot = None;
    }
    if slot.is_some() || !events_file.parent().is_some_and(Path::is_dir) {
        return;
    }
    let changed = changed.clone();
    match watch_file(events_file, move || {
        changed();
    }) {
        Ok(watch) => *slot = Some(watch),
        Err(e) => tracing::warn!("{e}"),
    }
}
