//! The edge to Kubernetes: reads and writes of manifests, statuses and Secrets, the caches the
//! watches fill, events, the leader lease and the state ConfigMap.

pub(crate) mod caches;
pub(crate) mod events;
pub(crate) mod kube_io;
pub(crate) mod leader;
pub(crate) mod secret_shape;
pub(crate) mod state;
#[cfg(test)]
pub(crate) mod test_cluster;
pub(crate) mod uid_key;
