//! The ValidatingAdmissionPolicy and binding generated from a ClientPolicy, so that
//! `kubectl apply` refuses a violating manifest natively (no webhook server). Only the checks of
//! one object go in: the namespace limit and approvals need the reconciler.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use sha2::{Digest, Sha256};

use super::cel_text::{string, string_list};
use super::{Check, CompiledPolicy};
use crate::resources::{ClientPolicy, PolicyKind};

/// The label that marks the admission objects this reconciler generates.
pub const GENERATED_LABEL: &str = "app.kubernetes.io/managed-by";
pub const GENERATED_BY: &str = "nauthera-reconciler";

/// The label naming the ClientPolicy an admission object comes from.
pub const POLICY_LABEL: &str = "nauthera.io/client-policy";

/// The name of the admission policy and binding generated from a ClientPolicy: the policy's own
/// name behind a prefix, or a digest of it where that would be too long for a name.
pub fn admission_name(policy: &str) -> String {
    let name = format!("nauthera-{policy}");
    if name.len() <= 253 {
        return name;
    }
    let digest: String = Sha256::digest(policy.as_bytes())
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("nauthera-{}-{digest}", &policy[..200])
}

/// The admission policy and its binding, owned by the ClientPolicy (deleted with it). `None`
/// when the policy has no check of one object (only a namespace limit or approvals).
pub fn admission_objects(
    policy: &ClientPolicy,
    compiled: &CompiledPolicy,
) -> Option<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    if compiled.checks.is_empty() {
        return None;
    }
    let name = admission_name(&compiled.name);
    let kinds: Vec<PolicyKind> = PolicyKind::ALL
        .into_iter()
        .filter(|kind| compiled.checks.iter().any(|c| c.kind == *kind))
        .filter(|kind| compiled.coverage.kinds.is_empty() || compiled.coverage.kinds.contains(kind))
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let mut conditions = vec![
        // Only what the manifest declares is judged: the reconciler's finalizer and annotation
        // writes on a manifest admitted before the policy must go through.
        MatchCondition {
            name: "spec-written".to_owned(),
            expression: "request.operation == 'CREATE' || object.spec != oldObject.spec".to_owned(),
        },
        MatchCondition {
            name: "not-deleting".to_owned(),
            expression: "!has(object.metadata.deletionTimestamp)".to_owned(),
        },
    ];
    if !compiled.coverage.issuers.is_empty() {
        conditions.push(MatchCondition {
            name: "issuer".to_owned(),
            expression: format!(
                "has(object.spec.issuer) && object.spec.issuer in {}",
                string_list(compiled.coverage.issuers.iter().map(String::as_str))
            ),
        });
    }
    let validations = compiled
        .checks
        .iter()
        .filter(|check| kinds.contains(&check.kind))
        .map(|check| Validation {
            expression: validation_expression(check),
            message: Some(check.message.clone()),
            reason: Some("Invalid".to_owned()),
            ..Validation::default()
        })
        .collect();
    let metadata = ObjectMeta {
        name: Some(name.clone()),
        labels: Some(
            [
                (GENERATED_LABEL.to_owned(), GENERATED_BY.to_owned()),
                (POLICY_LABEL.to_owned(), label_value(&compiled.name)),
            ]
            .into(),
        ),
        owner_references: owner(policy).map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    let admission = ValidatingAdmissionPolicy {
        metadata: metadata.clone(),
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                namespace_selector: compiled.coverage.namespace_selector.clone(),
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec!["nauthera.io".to_owned()]),
                    api_versions: Some(vec!["*".to_owned()]),
                    operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                    resources: Some(kinds.iter().map(|k| k.plural().to_owned()).collect()),
                    scope: Some("Namespaced".to_owned()),
                    ..NamedRuleWithOperations::default()
                }]),
                ..MatchResources::default()
            }),
            match_conditions: Some(conditions),
            validations: Some(validations),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    };
    let binding = ValidatingAdmissionPolicyBinding {
        metadata,
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    };
    Some((admission, binding))
}

/// The expression of a check as the admission policy holds it: every validation of a binding
/// runs on every object it matches, so each one passes objects of the other kinds.
pub fn validation_expression(check: &Check) -> String {
    format!(
        "object.kind != {} || ({})",
        string(check.kind.as_str()),
        check.expression
    )
}

/// The ClientPolicy as the owner of what is generated from it.
fn owner(policy: &ClientPolicy) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: ClientPolicy::api_version(&()).into_owned(),
        kind: ClientPolicy::kind(&()).into_owned(),
        name: policy.metadata.name.clone()?,
        uid: policy.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// A label value naming the policy: the name itself when it fits (63 characters).
fn label_value(policy: &str) -> String {
    if policy.len() <= 63 {
        policy.to_owned()
    } else {
        Sha256::digest(policy.as_bytes())
            .iter()
            .take(16)
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}
