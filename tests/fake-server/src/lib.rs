//! A faithful fake of nauthera-server's AdminService over mutual TLS, for tests and the sandbox.
//!
//! It holds organizations, clients, brandings and identity providers in memory, enforces the
//! server's access control (`allowed_clients` grants keyed by the client certificate's SAN),
//! revisions and preconditions, managers, field rules, change hints and audit events, and offers
//! test controls: out-of-band edits, backup restores, faults (before or after a call's effect, or
//! breaking open streams), hangs, latency, `Unimplemented` methods, unreachability and restarts. See `README.md` for what it does not emulate.
//!
//! Inside: `service` turns gRPC calls into calls of `core`, which holds the rules every call
//! shares (access, preconditions, revisions, change events, audit) and writes them once for all
//! kinds of object; `kinds` says what differs per kind (one `StoredKind` each); `state` is the
//! plain data.

pub mod config;
pub mod control_api;
pub mod controls;
pub mod core;
pub mod kinds;
pub mod method;
pub mod pki;
pub mod refusal;
pub mod rules;
pub mod server;
mod service;
pub mod state;

pub use config::{
    ClientIdentityConfig, FakeServerConfig, FapiModeSetting, OrganizationConfig, grant_everything,
};
pub use controls::{Counters, Fault, FaultCode};
pub use core::{Actor, Caller};
pub use method::Method;
pub use pki::{ClientCertOptions, IssuedCert, ServerTls, TestCa, TestPki};
pub use server::{ControlError, FakeServer, HeldObject, StartError};
pub use state::Backup;
