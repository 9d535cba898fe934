//! `deploy/` renders with `kubectl kustomize`, and what it renders keeps the promises the runbooks
//! make: probes, a TLS folder mounted without subPath, a restricted security context, alerts that
//! link to existing runbooks and use the catalog's metric labels.

use std::process::Command;

use nauthera_shared::catalog::{Reason, runbook_url};
use nauthera_tests::binaries::workspace_root;
use serde_json::Value;

fn render(path: &str) -> Vec<Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(workspace_root().join(path))
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl kustomize {path} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8 output");
    serde_saphyr::from_multiple(&text).expect("kustomize renders YAML")
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn base_renders_the_reconciler_with_its_crds_and_least_privilege_rbac() {
    let objects = render("deploy/base");
    let crds = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .count();
    assert_eq!(crds, 4, "the base installs the four CRDs");
    for object in &objects {
        let cluster_scoped = [
            "Namespace",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
        ]
        .contains(&object["kind"].as_str().unwrap_or_default());
        if !cluster_scoped {
            assert_eq!(
                object["metadata"]["namespace"], "nauthera-system",
                "{object}"
            );
        }
    }

    let deployment = find(&objects, "Deployment", "nauthera-reconciler");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "nauthera-reconciler");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(container["resources"]["requests"]["cpu"].is_string());
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"][0],
        "ALL"
    );
    let mounts = container["volumeMounts"].as_array().expect("volume mounts");
    let tls = mounts
        .iter()
        .find(|m| m["name"] == "tls")
        .expect("the TLS Secret is mounted");
    assert!(
        tls.get("subPath").is_none(),
        "a subPath mount never sees renewed certificates"
    );
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "nauthera-reconciler-tls"
    );

    let role = find(&objects, "ClusterRole", "nauthera-reconciler");
    let rules = role["rules"].as_array().expect("rules");
    for rule in rules {
        let verbs = rule["verbs"].as_array().expect("verbs");
        assert!(
            !verbs.contains(&Value::from("*")),
            "no wildcard verbs: {rule}"
        );
        assert!(
            !verbs.contains(&Value::from("delete")),
            "the reconciler deletes nothing: {rule}"
        );
        let resources = rule["resources"].as_array().expect("resources");
        assert!(
            !resources.contains(&Value::from("*")),
            "no wildcard resources: {rule}"
        );
    }
    let secrets = rules
        .iter()
        .find(|rule| {
            rule["resources"]
                .as_array()
                .is_some_and(|r| r.contains(&Value::from("secrets")))
        })
        .expect("a rule for Secrets");
    for verb in nauthera_shared::access::GENERATED_SECRET_VERBS {
        assert!(
            secrets["verbs"]
                .as_array()
                .unwrap()
                .contains(&Value::from(verb)),
            "the reconciler needs {verb} on Secrets: {secrets}"
        );
    }
    let service = find(&objects, "Service", "nauthera-reconciler-metrics");
    assert_eq!(service["spec"]["ports"][0]["port"], 8080);
}

#[test]
fn production_overlay_adds_the_certificate_and_alerts_that_link_to_runbooks() {
    let objects = render("deploy/overlays/production");
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    assert_eq!(certificate["spec"]["secretName"], "nauthera-reconciler-tls");
    assert_eq!(
        certificate["spec"]["dnsNames"][0],
        "nauthera-reconciler.nauthera-system.svc"
    );
    assert!(
        certificate["spec"]["usages"]
            .as_array()
            .expect("usages")
            .contains(&Value::from("client auth"))
    );
    find(&objects, "ServiceMonitor", "nauthera-reconciler");

    let rule = find(&objects, "PrometheusRule", "nauthera-reconciler");
    let alerts = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("alert rules");
    assert!(alerts.len() >= 4);
    let runbooks: Vec<String> = Reason::ALL.iter().map(|r| runbook_url(*r)).collect();
    let index = runbook_url(Reason::Registered).replace("Registered.md", "README.md");
    let labels: Vec<&str> = Reason::ALL.iter().map(|r| r.entry().metric_label).collect();
    for alert in alerts {
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .expect("every alert links a runbook");
        assert!(
            runbooks.iter().any(|r| r == url) || url == index,
            "{url} is no runbook page"
        );
        let expr = alert["expr"].as_str().expect("expr");
        for part in expr.split("reason=\"").skip(1) {
            let label = part.split('"').next().unwrap_or_default();
            assert!(
                labels.contains(&label),
                "{label} is not a metric label of the catalog"
            );
        }
    }
}
