//! The custom resources (group `nauthera.io`, version `v1alpha1`) (being written).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The CustomResourceDefinitions of every kind, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    Vec::new()
}
