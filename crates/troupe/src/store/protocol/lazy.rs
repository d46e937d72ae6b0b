//! [`LazyJsonProtocolStore`]: a workspace's protocol store for the commands that look at a team
//! without running it. Opening [`JsonProtocolStore`] creates its folder and lock file; this one
//! opens it only when there is something to read (the folder with its lock, state or archive)
//! or at the first write, so looking creates nothing: with nothing there, there are no
//! requests.

use std::sync::{Arc, Mutex};

use troupe_wire::{AgentName, ProtocolMessage, ProtocolRequest, RequestId};

use super::{
    Consumed, Deliver, Delivery, JsonProtocolStore, NewRequest, ProtocolError, ProtocolStore,
};
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;

pub struct LazyJsonProtocolStore {
    layout: Layout,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    opened: Mutex<Option<Arc<JsonProtocolStore>>>,
}

impl LazyJsonProtocolStore {
    pub fn new(layout: &Layout, clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Self {
        Self {
            layout: layout.clone(),
            clock,
            ids,
            opened: Mutex::new(None),
        }
    }

    /// Whether the workspace holds protocol state to read.
    fn present(&self) -> bool {
        if !self.layout.protocol_dir().is_dir() {
            return false;
        }
        let present = |path: std::path::PathBuf| path.symlink_metadata().is_ok();
        present(self.layout.protocol_lock())
            || present(self.layout.protocol_state())
            || present(self.layout.protocol_archive())
    }

    /// The store, opened (and created) now if it was not yet.
    fn open(&self) -> Result<Arc<JsonProtocolStore>, ProtocolError> {
        let mut opened = crate::sync::lock(&self.opened);
        if let Some(store) = &*opened {
            return Ok(store.clone());
        }
        let store = Arc::new(crate::sync::blocking(|| {
            JsonProtocolStore::open(&self.layout, self.clock.clone(), self.ids.clone())
        })?);
        *opened = Some(store.clone());
        Ok(store)
    }

    /// The store if there is anything to read (opened now if need be), else `None`.
    fn to_read(&self) -> Result<Option<Arc<JsonProtocolStore>>, ProtocolError> {
        if crate::sync::lock(&self.opened).is_none() && !crate::sync::blocking(|| self.present()) {
            return Ok(None);
        }
        self.open().map(Some)
    }
}

#[async_trait::async_trait]
impl ProtocolStore for LazyJsonProtocolStore {
    async fn create(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError> {
        self.open()?.create(new).await
    }

    async fn get(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError> {
        match self.to_read()? {
            Some(store) => store.get(id).await,
            None => Ok(None),
        }
    }

    async fn list(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        match self.to_read()? {
            Some(store) => store.list().await,
            None => Ok(Vec::new()),
        }
    }

    async fn pending(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        match self.to_read()? {
            Some(store) => store.pending().await,
            None => Ok(Vec::new()),
        }
    }

    async fn latest_plan_of(
        &self,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        match self.to_read()? {
            Some(store) => store.latest_plan_of(sender).await,
            None => Ok(None),
        }
    }

    async fn validate_request(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        self.open()?.validate_request(message).await
    }

    async fn validate_response(
        &self,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        self.open()?.validate_response(message).await
    }

    async fn consume_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError> {
        self.open()?.consume_response(message).await
    }

    async fn answer(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError> {
        self.open()?.answer(response, deliver).await
    }

    async fn deliver_recorded_answers(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError> {
        self.open()?.deliver_recorded_answers(deliver).await
    }

    async fn recorded_answer(
        &self,
        id: RequestId,
    ) -> Result<Option<ProtocolMessage>, ProtocolError> {
        self.open()?.recorded_answer(id).await
    }
}
