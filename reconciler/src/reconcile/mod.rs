//! The core: one pipeline generic over the managed kinds, its pure decisions, the per-kind modules,
//! the prerequisites between kinds and the client policies.

pub(crate) mod context;
pub(crate) mod decide;
pub(crate) mod kinds;
pub(crate) mod managed;
pub(crate) mod pipeline;
pub(crate) mod policies;
pub(crate) mod prerequisites;
