//! Generated code for the nauthera-server AdminService contract, `nauthera.admin.v1`.
//!
//! The contract lives in `nauthera/admin/v1/admin.proto` beside this crate; every message and field
//! is documented there. Rich error details (`google.rpc.ErrorInfo`, `google.rpc.BadRequest`) come
//! from `tonic-types`, re-exported here so every user agrees on one version.

mod redact;

pub use tonic_types;

/// The `nauthera.admin.v1` package.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("nauthera.admin.v1");
}

/// The `google.rpc.ErrorInfo` domain of every error the server defines.
pub const ERROR_DOMAIN: &str = "nauthera.io";

/// The API version the server reports in `ServerInfo.api_version`.
pub const API_VERSION: &str = "nauthera.admin.v1";
