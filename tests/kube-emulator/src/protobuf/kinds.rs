//! The messages the decoder knows, field by field, with the numbers of Kubernetes'
//! `generated.proto` files (k8s.io/api and k8s.io/apimachinery) and the JSON names of the Go
//! types. `opt` marks the fields the Go types hold by pointer: those are sent only when set, so
//! a zero there is a value; other scalars are always sent and a zero means unset.
//!
//! A field listed as `Unsupported` (or not listed) is refused when it carries a value, so a body
//! is never stored with part of it silently dropped.

use super::{Field, Kind, Message};

const fn field(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        repeated: false,
        pointer: false,
    }
}

/// A field the Go type holds by pointer.
const fn opt(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        pointer: true,
        ..field(number, name, kind)
    }
}

/// A repeated field.
const fn list(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        repeated: true,
        ..field(number, name, kind)
    }
}

use Kind::{
    Bool, BytesMap, FieldsV1, Int, IntOrString, QuantityMap, String, StringMap, Time, Unsupported,
};

const fn message(message: &'static Message) -> Kind {
    Kind::Message(message)
}

// --- k8s.io/apimachinery meta/v1 -------------------------------------------------------------

pub static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        field(1, "name", String),
        field(2, "generateName", String),
        field(3, "namespace", String),
        field(4, "selfLink", String),
        field(5, "uid", String),
        field(6, "resourceVersion", String),
        field(7, "generation", Int),
        field(8, "creationTimestamp", Time),
        opt(9, "deletionTimestamp", Time),
        opt(10, "deletionGracePeriodSeconds", Int),
        field(11, "labels", StringMap),
        field(12, "annotations", StringMap),
        list(13, "ownerReferences", message(&OWNER_REFERENCE)),
        list(14, "finalizers", String),
        list(17, "managedFields", message(&MANAGED_FIELDS_ENTRY)),
    ],
};

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        field(1, "kind", String),
        field(3, "name", String),
        field(4, "uid", String),
        field(5, "apiVersion", String),
        opt(6, "controller", Bool),
        opt(7, "blockOwnerDeletion", Bool),
    ],
};

static MANAGED_FIELDS_ENTRY: Message = Message {
    name: "ManagedFieldsEntry",
    fields: &[
        field(1, "manager", String),
        field(2, "operation", String),
        field(3, "apiVersion", String),
        opt(4, "time", Time),
        field(6, "fieldsType", String),
        opt(7, "fieldsV1", FieldsV1),
        field(8, "subresource", String),
    ],
};

static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        field(1, "matchLabels", StringMap),
        list(2, "matchExpressions", message(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        field(1, "key", String),
        field(2, "operator", String),
        list(3, "values", String),
    ],
};

// --- core/v1 ---------------------------------------------------------------------------------

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "data", BytesMap),
        field(3, "type", String),
        field(4, "stringData", StringMap),
        opt(5, "immutable", Bool),
    ],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "data", StringMap),
        field(3, "binaryData", BytesMap),
        opt(4, "immutable", Bool),
    ],
};

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&NAMESPACE_SPEC)),
        field(3, "status", message(&NAMESPACE_STATUS)),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[list(1, "finalizers", String)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        field(1, "phase", String),
        list(2, "conditions", Unsupported),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        list(2, "secrets", message(&OBJECT_REFERENCE)),
        list(3, "imagePullSecrets", message(&LOCAL_OBJECT_REFERENCE)),
        opt(4, "automountServiceAccountToken", Bool),
    ],
};

static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        field(1, "kind", String),
        field(2, "namespace", String),
        field(3, "name", String),
        field(4, "uid", String),
        field(5, "apiVersion", String),
        field(6, "resourceVersion", String),
        field(7, "fieldPath", String),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[field(1, "name", String)],
};

static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&SERVICE_SPEC)),
        field(3, "status", message(&SERVICE_STATUS)),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        list(1, "ports", message(&SERVICE_PORT)),
        field(2, "selector", StringMap),
        field(3, "clusterIP", String),
        field(4, "type", String),
        list(5, "externalIPs", String),
        field(7, "sessionAffinity", String),
        field(8, "loadBalancerIP", String),
        list(9, "loadBalancerSourceRanges", String),
        field(10, "externalName", String),
        field(11, "externalTrafficPolicy", String),
        field(12, "healthCheckNodePort", Int),
        field(13, "publishNotReadyAddresses", Bool),
        opt(14, "sessionAffinityConfig", Unsupported),
        opt(17, "ipFamilyPolicy", String),
        list(18, "clusterIPs", String),
        list(19, "ipFamilies", String),
        opt(20, "allocateLoadBalancerNodePorts", Bool),
        opt(21, "loadBalancerClass", String),
        opt(22, "internalTrafficPolicy", String),
        opt(23, "trafficDistribution", String),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        field(1, "name", String),
        field(2, "protocol", String),
        field(3, "port", Int),
        field(4, "targetPort", IntOrString),
        field(5, "nodePort", Int),
        opt(6, "appProtocol", String),
    ],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        field(1, "loadBalancer", Unsupported),
        list(2, "conditions", Unsupported),
    ],
};

static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&POD_SPEC)),
    ],
};

static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        list(1, "volumes", Unsupported),
        list(2, "containers", message(&CONTAINER)),
        field(3, "restartPolicy", String),
        opt(4, "terminationGracePeriodSeconds", Int),
        opt(5, "activeDeadlineSeconds", Int),
        field(6, "dnsPolicy", String),
        field(7, "nodeSelector", StringMap),
        field(8, "serviceAccountName", String),
        field(9, "serviceAccount", String),
        field(10, "nodeName", String),
        field(11, "hostNetwork", Bool),
        field(12, "hostPID", Bool),
        field(13, "hostIPC", Bool),
        opt(14, "securityContext", Unsupported),
        list(15, "imagePullSecrets", message(&LOCAL_OBJECT_REFERENCE)),
        field(16, "hostname", String),
        field(17, "subdomain", String),
        opt(18, "affinity", Unsupported),
        field(19, "schedulerName", String),
        list(20, "initContainers", message(&CONTAINER)),
        opt(21, "automountServiceAccountToken", Bool),
        list(22, "tolerations", message(&TOLERATION)),
        list(23, "hostAliases", message(&HOST_ALIAS)),
        field(24, "priorityClassName", String),
        opt(25, "priority", Int),
        opt(26, "dnsConfig", Unsupported),
        opt(27, "shareProcessNamespace", Bool),
        list(28, "readinessGates", message(&POD_READINESS_GATE)),
        opt(29, "runtimeClassName", String),
        opt(30, "enableServiceLinks", Bool),
        opt(31, "preemptionPolicy", String),
        field(32, "overhead", QuantityMap),
        list(33, "topologySpreadConstraints", Unsupported),
        list(34, "ephemeralContainers", Unsupported),
        opt(35, "setHostnameAsFQDN", Bool),
        opt(36, "os", message(&POD_OS)),
        opt(37, "hostUsers", Bool),
        list(38, "schedulingGates", message(&POD_SCHEDULING_GATE)),
        list(39, "resourceClaims", Unsupported),
        opt(40, "resources", message(&RESOURCE_REQUIREMENTS)),
        opt(41, "hostnameOverride", String),
    ],
};

static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        field(1, "name", String),
        field(2, "image", String),
        list(3, "command", String),
        list(4, "args", String),
        field(5, "workingDir", String),
        list(6, "ports", message(&CONTAINER_PORT)),
        list(7, "env", message(&ENV_VAR)),
        field(8, "resources", message(&RESOURCE_REQUIREMENTS)),
        list(9, "volumeMounts", message(&VOLUME_MOUNT)),
        opt(10, "livenessProbe", Unsupported),
        opt(11, "readinessProbe", Unsupported),
        opt(12, "lifecycle", Unsupported),
        field(13, "terminationMessagePath", String),
        field(14, "imagePullPolicy", String),
        opt(15, "securityContext", Unsupported),
        field(16, "stdin", Bool),
        field(17, "stdinOnce", Bool),
        field(18, "tty", Bool),
        list(19, "envFrom", Unsupported),
        field(20, "terminationMessagePolicy", String),
        list(21, "volumeDevices", message(&VOLUME_DEVICE)),
        opt(22, "startupProbe", Unsupported),
        list(23, "resizePolicy", message(&CONTAINER_RESIZE_POLICY)),
        opt(24, "restartPolicy", String),
        list(25, "restartPolicyRules", Unsupported),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        field(1, "name", String),
        field(2, "hostPort", Int),
        field(3, "containerPort", Int),
        field(4, "protocol", String),
        field(5, "hostIP", String),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        field(1, "name", String),
        field(2, "value", String),
        opt(3, "valueFrom", Unsupported),
    ],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        field(1, "limits", QuantityMap),
        field(2, "requests", QuantityMap),
        list(3, "claims", message(&RESOURCE_CLAIM)),
    ],
};

static RESOURCE_CLAIM: Message = Message {
    name: "ResourceClaim",
    fields: &[field(1, "name", String), field(2, "request", String)],
};

static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        field(1, "name", String),
        field(2, "readOnly", Bool),
        field(3, "mountPath", String),
        field(4, "subPath", String),
        opt(5, "mountPropagation", String),
        field(6, "subPathExpr", String),
        opt(7, "recursiveReadOnly", String),
    ],
};

static VOLUME_DEVICE: Message = Message {
    name: "VolumeDevice",
    fields: &[field(1, "name", String), field(2, "devicePath", String)],
};

static CONTAINER_RESIZE_POLICY: Message = Message {
    name: "ContainerResizePolicy",
    fields: &[
        field(1, "resourceName", String),
        field(2, "restartPolicy", String),
    ],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        field(1, "key", String),
        field(2, "operator", String),
        field(3, "value", String),
        field(4, "effect", String),
        opt(5, "tolerationSeconds", Int),
    ],
};

static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[field(1, "ip", String), list(2, "hostnames", String)],
};

static POD_READINESS_GATE: Message = Message {
    name: "PodReadinessGate",
    fields: &[field(1, "conditionType", String)],
};

static POD_OS: Message = Message {
    name: "PodOS",
    fields: &[field(1, "name", String)],
};

static POD_SCHEDULING_GATE: Message = Message {
    name: "PodSchedulingGate",
    fields: &[field(1, "name", String)],
};

// --- apps/v1 ---------------------------------------------------------------------------------

static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&DEPLOYMENT_SPEC)),
        field(3, "status", message(&DEPLOYMENT_STATUS)),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        opt(1, "replicas", Int),
        opt(2, "selector", message(&LABEL_SELECTOR)),
        field(3, "template", message(&POD_TEMPLATE_SPEC)),
        field(4, "strategy", message(&DEPLOYMENT_STRATEGY)),
        field(5, "minReadySeconds", Int),
        opt(6, "revisionHistoryLimit", Int),
        field(7, "paused", Bool),
        opt(9, "progressDeadlineSeconds", Int),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        field(1, "type", String),
        opt(2, "rollingUpdate", message(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        opt(1, "maxUnavailable", IntOrString),
        opt(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        field(1, "observedGeneration", Int),
        field(2, "replicas", Int),
        field(3, "updatedReplicas", Int),
        field(4, "availableReplicas", Int),
        field(5, "unavailableReplicas", Int),
        list(6, "conditions", message(&DEPLOYMENT_CONDITION)),
        field(7, "readyReplicas", Int),
        opt(8, "collisionCount", Int),
        opt(9, "terminatingReplicas", Int),
    ],
};

static DEPLOYMENT_CONDITION: Message = Message {
    name: "DeploymentCondition",
    fields: &[
        field(1, "type", String),
        field(2, "status", String),
        field(4, "reason", String),
        field(5, "message", String),
        field(6, "lastUpdateTime", Time),
        field(7, "lastTransitionTime", Time),
    ],
};

// --- autoscaling/v1 --------------------------------------------------------------------------

static SCALE: Message = Message {
    name: "Scale",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&SCALE_SPEC)),
        field(3, "status", message(&SCALE_STATUS)),
    ],
};

static SCALE_SPEC: Message = Message {
    name: "ScaleSpec",
    fields: &[field(1, "replicas", Int)],
};

static SCALE_STATUS: Message = Message {
    name: "ScaleStatus",
    fields: &[field(1, "replicas", Int), field(2, "selector", String)],
};

// --- rbac.authorization.k8s.io/v1 ------------------------------------------------------------

static ROLE: Message = Message {
    name: "Role",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        list(2, "rules", message(&POLICY_RULE)),
    ],
};

static CLUSTER_ROLE: Message = Message {
    name: "ClusterRole",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        list(2, "rules", message(&POLICY_RULE)),
        opt(3, "aggregationRule", message(&AGGREGATION_RULE)),
    ],
};

static AGGREGATION_RULE: Message = Message {
    name: "AggregationRule",
    fields: &[list(1, "clusterRoleSelectors", message(&LABEL_SELECTOR))],
};

static POLICY_RULE: Message = Message {
    name: "PolicyRule",
    fields: &[
        list(1, "verbs", String),
        list(2, "apiGroups", String),
        list(3, "resources", String),
        list(4, "resourceNames", String),
        list(5, "nonResourceURLs", String),
    ],
};

static ROLE_BINDING: Message = Message {
    name: "RoleBinding",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        list(2, "subjects", message(&SUBJECT)),
        field(3, "roleRef", message(&ROLE_REF)),
    ],
};

static SUBJECT: Message = Message {
    name: "Subject",
    fields: &[
        field(1, "kind", String),
        field(2, "apiGroup", String),
        field(3, "name", String),
        field(4, "namespace", String),
    ],
};

static ROLE_REF: Message = Message {
    name: "RoleRef",
    fields: &[
        field(1, "apiGroup", String),
        field(2, "kind", String),
        field(3, "name", String),
    ],
};

// --- authorization.k8s.io/v1 and authentication.k8s.io/v1 ------------------------------------

static SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "SubjectAccessReview",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&SUBJECT_ACCESS_REVIEW_SPEC)),
        field(3, "status", message(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

/// SubjectAccessReviewSpec; SelfSubjectAccessReviewSpec is its first two fields.
static SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "SubjectAccessReviewSpec",
    fields: &[
        opt(1, "resourceAttributes", message(&RESOURCE_ATTRIBUTES)),
        opt(
            2,
            "nonResourceAttributes",
            message(&NON_RESOURCE_ATTRIBUTES),
        ),
        field(3, "user", String),
        list(4, "groups", String),
        field(5, "extra", Unsupported),
        field(6, "uid", String),
    ],
};

static RESOURCE_ATTRIBUTES: Message = Message {
    name: "ResourceAttributes",
    fields: &[
        field(1, "namespace", String),
        field(2, "verb", String),
        field(3, "group", String),
        field(4, "version", String),
        field(5, "resource", String),
        field(6, "subresource", String),
        field(7, "name", String),
        opt(8, "fieldSelector", Unsupported),
        opt(9, "labelSelector", Unsupported),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Message = Message {
    name: "NonResourceAttributes",
    fields: &[field(1, "path", String), field(2, "verb", String)],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message {
    name: "SubjectAccessReviewStatus",
    fields: &[
        field(1, "allowed", Bool),
        field(2, "reason", String),
        field(3, "evaluationError", String),
        field(4, "denied", Bool),
    ],
};

static SELF_SUBJECT_REVIEW: Message = Message {
    name: "SelfSubjectReview",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "status", message(&SELF_SUBJECT_REVIEW_STATUS)),
    ],
};

static SELF_SUBJECT_REVIEW_STATUS: Message = Message {
    name: "SelfSubjectReviewStatus",
    fields: &[field(1, "userInfo", message(&USER_INFO))],
};

static USER_INFO: Message = Message {
    name: "UserInfo",
    fields: &[
        field(1, "username", String),
        field(2, "uid", String),
        list(3, "groups", String),
        field(4, "extra", Unsupported),
    ],
};

static TOKEN_REQUEST: Message = Message {
    name: "TokenRequest",
    fields: &[
        field(1, "metadata", message(&OBJECT_META)),
        field(2, "spec", message(&TOKEN_REQUEST_SPEC)),
        field(3, "status", message(&TOKEN_REQUEST_STATUS)),
    ],
};

static TOKEN_REQUEST_SPEC: Message = Message {
    name: "TokenRequestSpec",
    fields: &[
        list(1, "audiences", String),
        opt(3, "boundObjectRef", message(&BOUND_OBJECT_REFERENCE)),
        opt(4, "expirationSeconds", Int),
        field(5, "attestations", Unsupported),
    ],
};

static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "BoundObjectReference",
    fields: &[
        field(1, "kind", String),
        field(2, "apiVersion", String),
        field(3, "name", String),
        field(4, "uid", String),
    ],
};

static TOKEN_REQUEST_STATUS: Message = Message {
    name: "TokenRequestStatus",
    fields: &[
        field(1, "token", String),
        field(2, "expirationTimestamp", Time),
    ],
};

/// The top-level kinds, by apiVersion and kind.
pub fn message_for(api_version: &str, kind: &str) -> Option<&'static Message> {
    Some(match (api_version, kind) {
        ("v1", "Secret") => &SECRET,
        ("v1", "ConfigMap") => &CONFIG_MAP,
        ("v1", "Namespace") => &NAMESPACE,
        ("v1", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("v1", "Service") => &SERVICE,
        ("apps/v1", "Deployment") => &DEPLOYMENT,
        ("autoscaling/v1", "Scale") => &SCALE,
        ("rbac.authorization.k8s.io/v1", "Role") => &ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => &CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => &ROLE_BINDING,
        (
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview",
        ) => &SUBJECT_ACCESS_REVIEW,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => &SELF_SUBJECT_REVIEW,
        ("authentication.k8s.io/v1", "TokenRequest") => &TOKEN_REQUEST,
        _ => return None,
    })
}
