//! ValidatingAdmissionPolicies (`admissionregistration.k8s.io/v1`): every create, update and
//! delete of any resource, by anyone (the superuser too: policies are not RBAC), is checked
//! against the policies that bindings put in force, after the schema admission, the way the API
//! server's `validating` admission plugin does. `matching` decides which policies apply,
//! `evaluate` runs their CEL, `validation` refuses malformed policy objects, `params` finds a
//! binding's parameter objects.

mod evaluate;
pub mod loader;
mod matching;
mod params;
mod type_check;
mod validation;

pub use loader::Loaded;
pub use validation::{validate_binding, validate_policy};

use std::sync::Arc;

use serde_json::{Value, json};

use crate::authz::UserInfo;
use crate::objects::Access;
use crate::registry::{ResourceInfo, ResourceKey};
use crate::status::{ApiError, ApiResult, Cause, StatusReason};
use crate::store::Stored;

const GROUP: &str = "admissionregistration.k8s.io";
pub const POLICIES: &str = "validatingadmissionpolicies";
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// The admission operations policies select (`CONNECT` is never sent here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// One admission request, as policies see it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub operation: Operation,
    pub info: &'a ResourceInfo,
    /// The version the client addressed.
    pub version: &'a str,
    /// `""` for the main resource.
    pub subresource: &'a str,
    /// The object's namespace (`""` for cluster-scoped objects); see [`Request::namespace_of`].
    pub namespace: &'a str,
    pub name: &'a str,
    /// The object to be stored (`None` on DELETE).
    pub object: Option<&'a Value>,
    /// The stored object (`None` on CREATE).
    pub old_object: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
    /// The kind of `object` when it is not the resource's own (a Scale): group, version, kind.
    pub kind: Option<[&'a str; 3]>,
}

impl Request<'_> {
    /// The API server gives a Namespace's own requests the namespace of its name.
    pub fn namespace_of<'a>(info: &ResourceInfo, namespace: &'a str, name: &'a str) -> &'a str {
        if info.group.is_empty() && info.plural == "namespaces" {
            name
        } else {
            namespace
        }
    }

    fn is_namespace(&self) -> bool {
        self.info.group.is_empty() && self.info.plural == "namespaces"
    }

    /// The `request` variable: an `admission.k8s.io/v1` AdmissionRequest without the objects.
    fn to_json(&self) -> Value {
        let [group, version, kind] =
            self.kind
                .unwrap_or([&self.info.group, self.version, &self.info.kind]);
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let gvr = json!({"group": self.info.group, "version": self.version, "resource": self.info.plural});
        json!({
            "kind": gvk, "resource": gvr, "subResource": self.subresource,
            "requestKind": gvk, "requestResource": gvr, "requestSubResource": self.subresource,
            "name": self.name, "namespace": self.namespace, "operation": self.operation.as_str(),
            "userInfo": {"username": self.user.name, "uid": "", "groups": self.user.groups, "extra": {}},
            "dryRun": self.dry_run,
            "options": {"kind": self.operation.options_kind(), "apiVersion": "meta.k8s.io/v1"},
        })
    }
}

/// Policies never apply to admission configuration itself, so a bad policy can always be
/// fixed or removed.
fn exempt(info: &ResourceInfo) -> bool {
    info.group == GROUP
        && matches!(
            info.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

fn key(plural: &str) -> ResourceKey {
    ResourceKey {
        group: GROUP.into(),
        plural: plural.into(),
    }
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Why a request is refused: the first denial of the policies in force.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: StatusReason,
}

/// One policy and binding to evaluate, or why the binding could not be configured.
enum Pending {
    Invocation(evaluate::Invocation),
    Misconfigured(Denial),
}

/// Evaluates the policies in force for a request: `Ok` with `Warning` headers to send, or the
/// refusal the API server would answer.
pub fn admit(store: &mut dyn Access, request: &Request<'_>) -> ApiResult<Vec<String>> {
    if exempt(request.info) {
        return Ok(Vec::new());
    }
    // What is in force, not what is stored: see `loader`.
    let loaded = store.loaded_policies();
    let (policies, bindings) = (&loaded.policies, &loaded.bindings);
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let namespace = (!request.namespace.is_empty())
        .then(|| {
            let namespaces = ResourceKey {
                group: String::new(),
                plural: "namespaces".into(),
            };
            store.get(&namespaces, "", request.namespace)
        })
        .flatten();
    let namespace_labels = || {
        namespace.as_ref().map(|ns| {
            ns.value
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or_else(|| json!({}))
        })
    };
    let mut pending = Vec::new();
    for policy in policies {
        let spec = &policy.value["spec"];
        let ignore = spec["failurePolicy"].as_str() == Some("Ignore");
        let misconfigured = |binding: Option<&Arc<Stored>>, message: String| {
            let what = if binding.is_some() {
                "binding"
            } else {
                "policy"
            };
            Pending::Misconfigured(Denial {
                policy: name_of(&policy.value).to_owned(),
                binding: binding.map(|b| name_of(&b.value).to_owned()),
                message: format!("failed to configure {what}: {message}"),
                reason: StatusReason::Invalid,
            })
        };
        let bound: Vec<&Arc<Stored>> = bindings
            .iter()
            .filter(|b| {
                b.value.pointer("/spec/policyName").and_then(Value::as_str)
                    == Some(name_of(&policy.value))
            })
            .collect();
        if bound.is_empty() {
            continue;
        }
        match matching::matches(&spec["matchConstraints"], request, &namespace_labels, false) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => {
                if !ignore {
                    pending.push(misconfigured(None, error));
                }
                continue;
            }
        }
        for binding in bound {
            let constraints = &binding.value["spec"]["matchResources"];
            let selected = if constraints.is_null() {
                Ok(true)
            } else {
                matching::matches(constraints, request, &namespace_labels, true)
            };
            let found = selected.and_then(|selected| {
                selected
                    .then(|| {
                        params::collect(
                            store,
                            spec,
                            &binding.value["spec"]["paramRef"],
                            request.namespace,
                        )
                    })
                    .transpose()
            });
            match found {
                Ok(None) => {}
                Ok(Some(params)) => pending.push(Pending::Invocation(evaluate::Invocation {
                    policy: policy.clone(),
                    binding: binding.clone(),
                    params,
                })),
                Err(error) if !ignore => pending.push(misconfigured(Some(binding), error)),
                Err(_) => {}
            }
        }
    }
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let inputs = evaluate::Inputs {
        object: request.object.cloned().unwrap_or(Value::Null),
        old_object: request.old_object.cloned().unwrap_or(Value::Null),
        request: request.to_json(),
        namespace_object: namespace
            .filter(|_| !request.is_namespace())
            .map(|ns| namespace_object(&ns.value))
            .unwrap_or(Value::Null),
    };
    let invocations: Vec<&evaluate::Invocation> = pending
        .iter()
        .filter_map(|p| match p {
            Pending::Invocation(invocation) => Some(invocation),
            Pending::Misconfigured(_) => None,
        })
        .collect();
    let mut outcomes = evaluate::run(&invocations, &inputs)
        .map_err(|error| ApiError::internal(format!("admission policies could not run: {error}")))?
        .into_iter();
    let mut warnings = Vec::new();
    let mut denials = Vec::new();
    for item in pending {
        let invocation = match item {
            Pending::Misconfigured(denial) => {
                denials.push(denial);
                continue;
            }
            Pending::Invocation(invocation) => invocation,
        };
        let policy = name_of(&invocation.policy.value).to_owned();
        let binding = name_of(&invocation.binding.value).to_owned();
        let actions: Vec<&str> = invocation.binding.value["spec"]["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for failure in outcomes.next().unwrap_or_default() {
            for action in &actions {
                match *action {
                    "Deny" => denials.push(Denial {
                        policy: policy.clone(),
                        binding: Some(binding.clone()),
                        message: failure.message.clone(),
                        reason: failure.reason,
                    }),
                    "Warn" => warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding}': {}",
                        failure.message
                    )),
                    // Audit annotations go to an audit log the emulator does not keep.
                    _ => {}
                }
            }
        }
    }
    match denials.into_iter().next() {
        Some(denial) => Err(refusal(request, denial)),
        None => Ok(warnings),
    }
}

/// What policies may read of the request's Namespace (`namespaceObject`).
fn namespace_object(namespace: &Value) -> Value {
    let mut metadata = serde_json::Map::new();
    for key in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ] {
        if let Some(value) = namespace["metadata"].get(key) {
            metadata.insert(key.into(), value.clone());
        }
    }
    json!({"metadata": metadata, "spec": namespace["spec"], "status": namespace["status"]})
}

/// The API server's refusal: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy ...`
/// with the validation's reason (Invalid unless it says otherwise) and the policy's message as
/// the one cause.
fn refusal(request: &Request<'_>, denial: Denial) -> ApiError {
    let message = match &denial.binding {
        Some(binding) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
            denial.policy, denial.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            denial.policy, denial.message
        ),
    };
    let resource = crate::status::ResourceName {
        group: &request.info.group,
        plural: &request.info.plural,
    };
    let name = if request.name.is_empty() {
        "Unknown"
    } else {
        request.name
    };
    let mut error = ApiError::new(
        denial.reason,
        format!(
            "{} \"{name}\" is forbidden: {message}",
            resource.qualified()
        ),
    );
    error.name = Some(name.to_owned());
    error.group = Some(request.info.group.clone());
    error.kind = Some(request.info.plural.clone());
    error.causes.push(Cause {
        kind: "",
        message,
        field: String::new(),
    });
    error
}

/// Refuses a malformed policy or binding the way the API server's validation does (and fills
/// in the server's defaults).
pub fn admit_configuration(info: &ResourceInfo, object: &mut Value) -> ApiResult<()> {
    if info.group != GROUP {
        return Ok(());
    }
    let causes = match info.plural.as_str() {
        POLICIES => validate_policy(object),
        BINDINGS => validate_binding(object),
        _ => return Ok(()),
    };
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &info.kind,
            GROUP,
            name_of(object),
            causes,
        ))
    }
}
