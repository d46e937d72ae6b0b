//! `JsonProtocolStore`: the protocol port on `state.json`. (Implementation in progress.)

use std::sync::Arc;

use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;

pub struct JsonProtocolStore {
    #[allow(dead_code)]
    layout: Layout,
    #[allow(dead_code)]
    clock: Arc<dyn Clock>,
    #[allow(dead_code)]
    ids: Arc<dyn IdGenerator>,
}
