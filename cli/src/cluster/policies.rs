//! The reads the policy checks need: the ClientPolicies, a namespace's labels and OIDCClients,
//! the object as stored, a client's ClientApprovals, and whether the caller may approve. Each
//! read comes back as plain facts or the sentence saying why it could not be made.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use nauthera_shared::resources::{
    Branding, ClientApproval, ClientPolicy, IdentityProvider, OIDCClient, Organization,
};
use serde::Serialize;
use serde_json::Value;

use crate::cli::kinds::Kind;
use crate::cluster::facts::AccessVerdict;
use crate::cluster::{Cluster, Scope};
use crate::error::{api_code, describe_kube_error};
use crate::model::policies::{
    APPROVALS_RESOURCE, ApprovalFact, CountedClient, Judged, NamespaceLabels, POLICIES_RESOURCE,
    Policies, PolicyListing, PolicyOutcome, evaluate,
};

/// Every ClientPolicy of the cluster.
pub async fn list_policies(cluster: &Cluster) -> PolicyListing {
    let api: Api<ClientPolicy> = Api::all(cluster.client.clone());
    match api.list(&ListParams::default()).await {
        Ok(list) => PolicyListing::Listed(list.items),
        Err(error) if api_code(&error) == Some(404) => PolicyListing::NotInstalled,
        Err(error) if api_code(&error) == Some(403) => {
            let (detail, _) = describe_kube_error(&error);
            PolicyListing::Forbidden(format!("cannot list {POLICIES_RESOURCE}: {detail}"))
        }
        Err(error) => {
            let (detail, hint) = describe_kube_error(&error);
            PolicyListing::Failed(format!("cannot list {POLICIES_RESOURCE}: {detail}; {hint}"))
        }
    }
}

/// A namespace's labels; only its name label when the Namespace cannot be read or does not
/// exist yet, with why.
pub async fn namespace_labels(cluster: &Cluster, namespace: &str) -> NamespaceLabels {
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    match api.get_opt(namespace).await {
        Ok(Some(found)) => {
            NamespaceLabels::of(namespace, found.metadata.labels.unwrap_or_default())
        }
        Ok(None) => NamespaceLabels::unknown(
            namespace,
            format!("namespace {namespace} does not exist yet, so only its name label is known"),
        ),
        Err(error) => {
            let (detail, _) = describe_kube_error(&error);
            NamespaceLabels::unknown(
                namespace,
                format!(
                    "cannot read Namespace {namespace} for its labels: {detail}; only its name \
                     label is known"
                ),
            )
        }
    }
}

/// The OIDCClients of a namespace, as the namespace limit counts them.
pub async fn counted_clients(
    cluster: &Cluster,
    namespace: &str,
) -> Result<Vec<CountedClient>, String> {
    match cluster
        .list_kind(Kind::OidcClient, &Scope::Namespace(namespace.to_owned()))
        .await
    {
        Ok(views) => Ok(views
            .unwrap_or_default()
            .into_iter()
            .map(|view| CountedClient {
                name: view.name,
                issuer: view.issuer,
                created: view.created,
                order: 0,
                deleting: view.deleting,
            })
            .collect()),
        Err(error) => Err(format!(
            "cannot count the OIDCClients of namespace {namespace}: {error}"
        )),
    }
}

/// The resource as the API server stores it (defaults filled in), as JSON; `Ok(None)` when it
/// does not exist.
pub async fn stored_object(
    cluster: &Cluster,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, String> {
    async fn get<K>(cluster: &Cluster, namespace: &str, name: &str) -> kube::Result<Option<Value>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        let object = cluster.namespaced::<K>(namespace).get_opt(name).await?;
        Ok(object.and_then(|object| serde_json::to_value(object).ok()))
    }
    let result = match kind {
        Kind::OidcClient => get::<OIDCClient>(cluster, namespace, name).await,
        Kind::Branding => get::<Branding>(cluster, namespace, name).await,
        Kind::IdentityProvider => get::<IdentityProvider>(cluster, namespace, name).await,
        Kind::Organization => get::<Organization>(cluster, namespace, name).await,
    };
    result.map_err(|error| {
        let (detail, hint) = describe_kube_error(&error);
        format!(
            "cannot read {}/{name} in namespace {namespace}: {detail}; {hint}",
            kind.singular()
        )
    })
}

/// The ClientApprovals of one client, by generation.
pub async fn client_approvals(
    cluster: &Cluster,
    namespace: &str,
    client: &str,
) -> Result<Vec<ApprovalFact>, String> {
    let api: Api<ClientApproval> = cluster.namespaced(namespace);
    let list = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(error) if api_code(&error) == Some(404) => Vec::new(),
        Err(error) => {
            let (detail, hint) = describe_kube_error(&error);
            return Err(format!(
                "cannot list {} in namespace {namespace}: {detail}; {hint}",
                APPROVALS_RESOURCE
            ));
        }
    };
    let mut approvals: Vec<ApprovalFact> = list
        .into_iter()
        .filter(|approval| approval.spec.client == client)
        .map(|approval| ApprovalFact {
            name: approval.metadata.name.clone().unwrap_or_default(),
            generation: approval.spec.generation,
            uid: approval.spec.uid.clone(),
            created: approval.metadata.creation_timestamp.as_ref().map(|t| t.0),
        })
        .collect();
    approvals.sort_by(|a, b| (a.generation, &a.name).cmp(&(b.generation, &b.name)));
    Ok(approvals)
}

/// `kubectl auth can-i create clientapprovals.nauthera.io -n <namespace>` for the caller.
pub async fn may_approve(cluster: &Cluster, namespace: &str) -> AccessVerdict {
    let api: Api<SelfSubjectAccessReview> = Api::all(cluster.client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some("create".to_owned()),
                group: Some(nauthera_shared::GROUP.to_owned()),
                resource: Some("clientapprovals".to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    match api.create(&PostParams::default(), &review).await {
        Ok(answer) => {
            let status = answer.status.unwrap_or_default();
            AccessVerdict {
                verb: "create".to_owned(),
                allowed: Some(status.allowed),
                detail: status.reason.unwrap_or_default(),
            }
        }
        Err(error) => {
            let (detail, hint) = describe_kube_error(&error);
            AccessVerdict {
                verb: "create".to_owned(),
                allowed: None,
                detail: format!("cannot run the access review: {detail}; {hint}"),
            }
        }
    }
}

/// The policy reads one `diagnose` run shares: the policies once, and each namespace's labels
/// and OIDCClients once.
#[derive(Default)]
pub struct LiveReads {
    policies: Option<Policies>,
    labels: std::collections::BTreeMap<String, NamespaceLabels>,
    clients: std::collections::BTreeMap<String, Result<Vec<CountedClient>, String>>,
}

impl LiveReads {
    /// The policies' verdicts on a live resource; `None` for a kind no policy covers.
    /// `approved`: the generations its ClientApprovals approve.
    pub async fn judge(
        &mut self,
        cluster: &Cluster,
        view: &crate::model::view::ResourceView,
        approved: &[i64],
    ) -> Option<PolicyOutcome> {
        let kind = view.kind.policy_kind()?;
        if self.policies.is_none() {
            let listing = list_policies(cluster).await;
            self.policies = Some(Policies::from_listing(&listing));
        }
        let policies = self.policies.as_ref()?;
        let mut object = Value::Null;
        if policies.listed().is_some() {
            match stored_object(cluster, view.kind, &view.namespace, &view.name).await {
                Ok(Some(found)) => object = found,
                Ok(None) => {}
                Err(why) => return Some(PolicyOutcome::Unlisted { why }),
            }
            if !self.labels.contains_key(&view.namespace) {
                let labels = namespace_labels(cluster, &view.namespace).await;
                self.labels.insert(view.namespace.clone(), labels);
            }
            if view.kind == Kind::OidcClient && !self.clients.contains_key(&view.namespace) {
                let clients = counted_clients(cluster, &view.namespace).await;
                self.clients.insert(view.namespace.clone(), clients);
            }
        }
        let labels = self
            .labels
            .get(&view.namespace)
            .cloned()
            .unwrap_or_else(|| NamespaceLabels::of(&view.namespace, Default::default()));
        let clients = match self.clients.get(&view.namespace) {
            Some(Ok(clients)) => Ok(clients.as_slice()),
            Some(Err(why)) => Err(why.as_str()),
            None => Ok(&[][..]),
        };
        let status = view.status.as_ref();
        let place = CountedClient {
            name: view.name.clone(),
            issuer: view.issuer.clone(),
            created: view.created,
            order: 0,
            deleting: view.deleting,
        };
        policies.outcome(|set| {
            evaluate(
                set,
                &Judged {
                    kind,
                    namespace: &view.namespace,
                    issuer: &view.issuer,
                    object: &object,
                    place: &place,
                    generation: view.generation.unwrap_or(1),
                    written: status.is_some_and(|s| s.revision.is_some()),
                    recorded: status.and_then(|s| s.approval.as_deref()),
                    approved,
                },
                &labels,
                clients,
            )
        })
    }
}
