//! The kinds the pipeline reconciles, each a small module: its spec conversion, its AdminService
//! calls, its secret handling, what drift compares.

pub mod oidc_client;
