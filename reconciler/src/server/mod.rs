//! The edge to nauthera-server: the AdminService wrapper with its metrics, the change stream and
//! the revisions it reports, the calls a reconcile makes, and the map from namespaces to
//! organizations.

pub(crate) mod admin;
pub(crate) mod changes;
pub(crate) mod client_revisions;
pub(crate) mod namespace_map;
pub(crate) mod server_calls;
