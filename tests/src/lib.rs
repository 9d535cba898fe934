//! The end-to-end harness: the workspace's binaries built on demand, child processes that announce
//! where they listen, manifests applied the way a user applies them, and the real-cluster switch
//! ([`cluster::TestCluster`] on the emulator or a real control plane, [`control_plane`]). The sandbox binary and the end-to-end tests are built on these.
//! [`krew`] holds the plugin manifest's release rule, for its test and the release command.

pub mod bench;
pub mod binaries;
pub mod chaos;
pub mod cluster;
pub mod control_plane;
pub mod e2e;
pub mod gitops;
pub mod helm;
pub mod installed;
pub mod krew;
pub mod manifests;
pub mod previous;
pub mod process;
pub mod proxy;
pub mod rendered;
pub mod upgrade;
