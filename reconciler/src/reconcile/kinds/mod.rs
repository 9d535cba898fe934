//! The kinds the pipeline reconciles, each a small module: its spec conversion, its AdminService
//! calls, its secret handling, what drift compares, what it depends on.

pub mod branding;
pub mod identity_provider;
pub mod oidc_client;
pub mod organization;
