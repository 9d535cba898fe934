//! A Kubernetes API emulator (being written).
