//! Reading what the reconciler publishes: its state ConfigMap and its Deployment's readiness.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use nauthera_shared::control_plane::{ControlPlaneState, STATE_CONFIGMAP, STATE_KEY, STATE_LABEL};
use serde::Serialize;

use crate::cluster::Cluster;
use crate::error::describe_kube_error;

/// The reconciler's Deployment and ServiceAccount name in the standard install.
pub const RECONCILER_NAME: &str = "nauthera-reconciler";

/// Ready and desired replicas of the reconciler's Deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replicas {
    pub desired: i32,
    pub ready: i32,
}

/// Everything known about the control plane without server credentials.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControlPlaneFacts {
    pub namespace: String,
    pub state: Option<ControlPlaneState>,
    /// Why the state could not be read, when it could not.
    pub state_problem: Option<String>,
    pub replicas: Option<Replicas>,
    pub replicas_problem: Option<String>,
}

impl ControlPlaneFacts {
    /// Reads the state in `namespace`; when it is not there, looks for the state's label in
    /// every namespace (a reconciler installed elsewhere) and takes that namespace if exactly one
    /// is found.
    pub async fn gather(cluster: &Cluster, namespace: &str) -> ControlPlaneFacts {
        let mut namespace = namespace.to_owned();
        let mut found = cluster
            .namespaced::<ConfigMap>(&namespace)
            .get_opt(STATE_CONFIGMAP)
            .await;
        if let Ok(None) = found
            && let Some((elsewhere, config_map)) = find_by_label(cluster).await
        {
            namespace = elsewhere;
            found = Ok(Some(config_map));
        }
        let namespace = namespace.as_str();
        let mut facts = ControlPlaneFacts {
            namespace: namespace.to_owned(),
            ..ControlPlaneFacts::default()
        };
        match found {
            Ok(Some(config_map)) => match parse_state(&config_map) {
                Ok(state) => facts.state = Some(state),
                Err(problem) => facts.state_problem = Some(problem),
            },
            Ok(None) => {
                facts.state_problem = Some(format!(
                    "ConfigMap {STATE_CONFIGMAP} not found in namespace {namespace}: the \
                     reconciler has no leader yet, runs elsewhere (--reconciler-namespace), or is \
                     not installed"
                ))
            }
            Err(error) => {
                let (detail, hint) = describe_kube_error(&error);
                facts.state_problem = Some(format!(
                    "cannot read ConfigMap {STATE_CONFIGMAP} in namespace {namespace}: {detail}; \
                     {hint}"
                ));
            }
        }
        match cluster
            .namespaced::<Deployment>(namespace)
            .get_opt(RECONCILER_NAME)
            .await
        {
            Ok(Some(deployment)) => facts.replicas = Some(replicas_of(&deployment)),
            Ok(None) => {
                facts.replicas_problem = Some(format!(
                    "Deployment {RECONCILER_NAME} not found in namespace {namespace}"
                ))
            }
            Err(error) => {
                let (detail, _) = describe_kube_error(&error);
                facts.replicas_problem = Some(format!(
                    "cannot read Deployment {RECONCILER_NAME} in namespace {namespace}: {detail}"
                ));
            }
        }
        facts
    }
}

/// The one state ConfigMap in the cluster that carries the state's label, if the user may list
/// ConfigMaps everywhere and there is exactly one.
async fn find_by_label(cluster: &Cluster) -> Option<(String, ConfigMap)> {
    let (key, value) = STATE_LABEL;
    let params = ListParams::default().labels(&format!("{key}={value}"));
    let api: Api<ConfigMap> = Api::all(cluster.client.clone());
    let mut items = api.list(&params).await.ok()?.items;
    if items.len() != 1 {
        return None;
    }
    let config_map = items.pop()?;
    let namespace = config_map.metadata.namespace.clone()?;
    (config_map.metadata.name.as_deref() == Some(STATE_CONFIGMAP))
        .then_some((namespace, config_map))
}

/// The published state out of the ConfigMap: the JSON document under `state.json`.
pub fn parse_state(config_map: &ConfigMap) -> Result<ControlPlaneState, String> {
    let text = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(STATE_KEY));
    match text {
        Some(text) => serde_json::from_str(text).map_err(|error| {
            format!(
                "ConfigMap {STATE_CONFIGMAP} key {STATE_KEY} is not the state this plugin reads \
                 ({error}); is the plugin older than the reconciler?"
            )
        }),
        None => Err(format!(
            "ConfigMap {STATE_CONFIGMAP} has no key {STATE_KEY}; is the plugin older than the \
             reconciler?"
        )),
    }
}

pub fn replicas_of(deployment: &Deployment) -> Replicas {
    Replicas {
        desired: deployment
            .spec
            .as_ref()
            .and_then(|spec| spec.replicas)
            .unwrap_or(1),
        ready: deployment
            .status
            .as_ref()
            .and_then(|status| status.ready_replicas)
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nauthera_shared::catalog::Reason;

    fn config_map(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_contract_document_is_read() {
        let state = ControlPlaneState {
            leader: "pod-0".into(),
            probe_reason: Some(Reason::Unreachable),
            ..ControlPlaneState::default()
        };
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(parse_state(&config_map(&[(STATE_KEY, &json)])), Ok(state));
        assert!(parse_state(&config_map(&[(STATE_KEY, "{")])).is_err());
        assert!(parse_state(&config_map(&[])).is_err());
    }
}
