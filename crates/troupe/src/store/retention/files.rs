//! The file adapter of [`super::Prune`]: a workspace's `.troupe/`.

use super::{Prune, Report, Sweep};
use crate::layout::Layout;
use crate::store::PortError;

/// A workspace's state under `.troupe/`, pruned kind by kind.
#[derive(Debug, Clone)]
pub struct FileState {
    layout: Layout,
}

impl FileState {
    pub fn new(layout: Layout) -> Self {
        Self { layout }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

#[async_trait::async_trait]
impl Prune for FileState {
    async fn prune(&self, _sweep: &Sweep, _report: &mut Report) -> Result<(), PortError> {
        Ok(())
    }
}
