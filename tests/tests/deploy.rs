//! `deploy/` renders with `kubectl kustomize`, and what it renders keeps the promises the runbooks
//! make: probes, a TLS folder mounted without subPath, a restricted security context, alerts that
//! link to existing runbooks and use the catalog's metric labels. Every overlay (and through the
//! overlays every component) puts each namespaced object in the namespace the reconciler runs in,
//! the README's install section names what the overlay expects to find in the cluster, and the
//! image build leaves `target/` out of its context.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use nauthera_shared::catalog::{Reason, runbook_url};
use nauthera_shared::grants::GrantEntry;
use nauthera_tests::binaries::workspace_root;
use serde_json::Value;

/// Where the base puts the reconciler, and so every overlay that does not set `namespace:`.
const BASE_NAMESPACE: &str = "nauthera-system";

/// Kinds that live outside namespaces. Any other kind is taken as namespaced, so a new kind that
/// is cluster-scoped has to be added here before its objects pass.
const CLUSTER_SCOPED_KINDS: [&str; 7] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ClusterIssuer",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

fn render(path: &str) -> Vec<Value> {
    render_dir(&workspace_root().join(path))
}

fn render_dir(dir: &Path) -> Vec<Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8 output");
    serde_saphyr::from_multiple(&text).expect("kustomize renders YAML")
}

/// The `kustomization.yaml` of a folder.
fn kustomization(dir: &Path) -> Value {
    let path = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The folders directly under `deploy/<folder>` that hold a `kustomization.yaml`.
fn kustomizations_under(folder: &str) -> Vec<PathBuf> {
    let parent = workspace_root().join("deploy").join(folder);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&parent)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", parent.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|dir| dir.join("kustomization.yaml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The namespace an overlay's objects belong in: the one it sets, else the base's.
fn namespace_of(overlay: &Path) -> String {
    kustomization(overlay)["namespace"]
        .as_str()
        .unwrap_or(BASE_NAMESPACE)
        .to_owned()
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Every way the rendered `objects` are not where a reconciler running in `namespace` needs them,
/// one sentence each: a namespaced object in another (or no) namespace, a cluster-scoped one with
/// a namespace, the Namespace itself under another name, a binding to a ServiceAccount elsewhere,
/// a certificate for an identity in another namespace.
fn misplaced(objects: &[Value], namespace: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = describe(object);
        let actual = object["metadata"]["namespace"].as_str();
        if CLUSTER_SCOPED_KINDS.contains(&kind) {
            if let Some(actual) = actual {
                problems.push(format!(
                    "{name} is cluster-scoped but names namespace {actual}"
                ));
            }
        } else if actual != Some(namespace) {
            problems.push(format!(
                "{name} lands in {} instead of {namespace}",
                actual.map_or("the namespace of the user's context".to_owned(), |a| {
                    format!("namespace {a}")
                })
            ));
        }
        if kind == "Namespace" && object["metadata"]["name"] != namespace {
            problems.push(format!("{name} is created instead of {namespace}"));
        }
        for subject in object["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" && subject["namespace"] != namespace {
                problems.push(format!(
                    "{name} binds the ServiceAccount {} in {} instead of {namespace}",
                    subject["name"], subject["namespace"]
                ));
            }
        }
        if kind == "Certificate" {
            let suffix = format!(".{namespace}.svc");
            let names = object["spec"]["dnsNames"].as_array().into_iter().flatten();
            for dns in names.chain([&object["spec"]["commonName"]]) {
                if dns.as_str().is_some_and(|dns| !dns.ends_with(&suffix)) {
                    problems.push(format!("{name} is for {dns}, not a name in {namespace}"));
                }
            }
        }
    }
    problems
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
    assert_eq!(
        crds,
        nauthera_shared::resources::crds().len(),
        "the base installs every CRD (the four kinds, ClientPolicy, ClientApproval)"
    );
    assert_eq!(misplaced(&objects, BASE_NAMESPACE), Vec::<String>::new());

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
        let resources = rule["resources"].as_array().expect("resources");
        // It deletes a Secret it delivered once the manifest names another, and the admission
        // policy it generated once its ClientPolicy has no rule to check at admission.
        let deletable = [
            "secrets",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ];
        assert!(
            !verbs.contains(&Value::from("delete"))
                || resources
                    .iter()
                    .all(|r| deletable.contains(&r.as_str().unwrap_or_default())),
            "the reconciler deletes nothing but Secrets and its admission policies: {rule}"
        );
        // It never approves: approvals are the security team's.
        assert!(
            !resources.contains(&Value::from("clientapprovals"))
                || verbs
                    .iter()
                    .all(|v| ["get", "list", "watch"].contains(&v.as_str().unwrap_or_default())),
            "the reconciler only reads ClientApprovals: {rule}"
        );
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
    let grants = |role: &Value, group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().unwrap().iter().any(|rule| {
            let has = |field: &str, value: &str| {
                rule[field]
                    .as_array()
                    .is_some_and(|v| v.contains(&Value::from(value)))
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    for resource in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ] {
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            assert!(
                grants(role, "admissionregistration.k8s.io", resource, verb),
                "the reconciler needs {verb} on {resource}"
            );
        }
    }
    assert!(grants(
        role,
        "nauthera.io",
        "clientpolicies/status",
        "patch"
    ));
    assert!(grants(role, "nauthera.io", "clientpolicies", "watch"));
    assert!(grants(role, "nauthera.io", "clientapprovals", "watch"));
    assert!(grants(role, "", "namespaces", "watch"));
    // The security team approves; nothing else shipped may.
    let security = find(&objects, "ClusterRole", "nauthera-client-policy-admin");
    assert!(grants(security, "nauthera.io", "clientapprovals", "create"));
    assert!(grants(security, "nauthera.io", "clientpolicies", "create"));
    for other in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
        .filter(|o| o["metadata"]["name"] != "nauthera-client-policy-admin")
    {
        assert!(
            !grants(other, "nauthera.io", "clientapprovals", "create"),
            "{} may not approve",
            other["metadata"]["name"]
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

#[test]
fn the_namespace_check_names_each_misplaced_object() {
    let objects: Vec<Value> = serde_json::from_value(serde_json::json!([
        {"kind": "Deployment", "metadata": {"name": "a", "namespace": "nauthera-system"}},
        {"kind": "Certificate", "metadata": {"name": "b"},
         "spec": {"dnsNames": ["nauthera-reconciler.nauthera-system.svc"]}},
        {"kind": "ServiceMonitor", "metadata": {"name": "c", "namespace": "default"}},
        {"kind": "ClusterRole", "metadata": {"name": "d"}},
        {"kind": "ClusterIssuer", "metadata": {"name": "e", "namespace": "nauthera-system"}},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "f"},
         "subjects": [{"kind": "ServiceAccount", "name": "r", "namespace": "elsewhere"}]},
    ]))
    .unwrap();
    assert_eq!(
        misplaced(&objects, "nauthera-system"),
        [
            "Certificate b lands in the namespace of the user's context instead of nauthera-system",
            "ServiceMonitor c lands in namespace default instead of nauthera-system",
            "ClusterIssuer e is cluster-scoped but names namespace nauthera-system",
            "ClusterRoleBinding f binds the ServiceAccount \"r\" in \"elsewhere\" instead of \
             nauthera-system",
        ]
    );
    let moved = misplaced(&objects[..2], "team-ops");
    assert!(
        moved
            .iter()
            .any(|p| p.contains("is for \"nauthera-reconciler.nauthera-system.svc\"")),
        "a certificate for another namespace's identity is named: {moved:?}"
    );
}

#[test]
fn every_overlay_puts_each_namespaced_object_in_its_namespace() {
    let overlays = kustomizations_under("overlays");
    assert!(!overlays.is_empty(), "deploy/overlays holds no overlay");
    let mut problems = Vec::new();
    for overlay in &overlays {
        let namespace = namespace_of(overlay);
        let objects = render_dir(overlay);
        assert!(
            objects.iter().any(|o| o["kind"] == "Namespace"),
            "{} creates no Namespace",
            overlay.display()
        );
        for problem in misplaced(&objects, &namespace) {
            problems.push(format!("{}: {problem}", overlay.display()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_component_is_rendered_by_an_overlay() {
    let mut used = BTreeSet::new();
    for overlay in kustomizations_under("overlays") {
        for component in kustomization(&overlay)["components"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let dir = overlay.join(component.as_str().expect("a component path"));
            used.insert(dir.canonicalize().expect("the component exists"));
        }
    }
    for component in kustomizations_under("components") {
        assert!(
            used.contains(&component.canonicalize().unwrap()),
            "no overlay uses {}, so nothing checks where its objects land",
            component.display()
        );
    }
}

/// The README's install section: from its heading to the next one.
fn install_section() -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Install\n")
        .expect("the README has an Install section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

#[test]
fn the_install_section_names_what_the_production_overlay_expects() {
    let install = install_section();
    let objects = render("deploy/overlays/production");
    let certificate = find(&objects, "Certificate", "nauthera-reconciler");
    let issuer = &certificate["spec"]["issuerRef"];
    let issuer_kind = issuer["kind"].as_str().unwrap();
    let issuer_name = issuer["name"].as_str().unwrap();
    assert!(
        install.contains(&format!("{issuer_kind} `{issuer_name}`")),
        "the install section names the {issuer_kind} {issuer_name} the Certificate uses"
    );
    for object in &objects {
        let group = object["apiVersion"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap();
        if group == "monitoring.coreos.com" {
            let kind = object["kind"].as_str().unwrap();
            assert!(
                install.contains(kind) && install.contains("Prometheus Operator"),
                "the install section says that {kind} needs the Prometheus Operator's CRDs"
            );
        }
    }

    // The allowed_clients entry, in the shape the plugin proposes one, for the certificate's
    // identity.
    let identity = format!(
        "dns:{}",
        certificate["spec"]["dnsNames"][0].as_str().unwrap()
    );
    let block = install
        .split("```yaml\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("identity:"))
        .expect("the install section shows an allowed_clients entry in a yaml block");
    let entries: Vec<GrantEntry> = serde_saphyr::from_str(block).expect("the entry parses");
    assert_eq!(entries.len(), 1, "{block}");
    assert_eq!(entries[0].identity, identity);
    assert!(!entries[0].operations.is_empty());
    assert!(!entries[0].organizations.is_empty());
    assert!(!entries[0].namespaces.is_empty());
    assert!(block.starts_with(&format!("- identity: \"{identity}\"\n")));
}

/// The `.dockerignore` patterns of a build context, as Docker reads them: one per line, `#`
/// comments and blank lines skipped, a leading or trailing `/` dropped.
fn ignore_patterns(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            // Exceptions and character classes would need more than the matcher below does.
            assert!(
                !line.starts_with('!') && !line.contains(['[', '\\']),
                "{line:?}: the check understands *, ? and ** only"
            );
            line.trim_matches('/').to_owned()
        })
        .collect()
}

/// One path segment against one pattern segment: `*` is any run of characters, `?` one.
fn segment_matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => (0..=name.len()).any(|i| segment_matches(rest, &name[i..])),
        (Some((b'?', rest)), Some((_, tail))) => segment_matches(rest, tail),
        (Some((p, rest)), Some((n, tail))) => p == n && segment_matches(rest, tail),
        _ => false,
    }
}

/// A path against a pattern, segment by segment; `**` is any number of segments, none included.
fn glob_matches(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|i| glob_matches(rest, &path[i..])),
        Some((first, rest)) => path.split_first().is_some_and(|(name, tail)| {
            segment_matches(first.as_bytes(), name.as_bytes()) && glob_matches(rest, tail)
        }),
    }
}

/// Whether Docker leaves `path` (relative to the context) out: a pattern matches it or one of
/// the folders it is in.
fn ignored(patterns: &[String], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    patterns.iter().any(|pattern| {
        let pattern: Vec<&str> = pattern.split('/').collect();
        (1..=segments.len()).any(|n| glob_matches(&pattern, &segments[..n]))
    })
}

#[test]
fn the_ignore_matcher_follows_docker() {
    let patterns = ignore_patterns("# build output\n/target/\n**/*.swp\n.idea\n\n");
    assert!(ignored(&patterns, "target"));
    assert!(ignored(&patterns, "target/release/nauthera-reconciler"));
    assert!(ignored(&patterns, "a.swp"));
    assert!(ignored(&patterns, "shared/src/.lib.rs.swp"));
    assert!(ignored(&patterns, ".idea/workspace.xml"));
    assert!(
        !ignored(&patterns, "tests/target"),
        "a pattern is anchored at the root"
    );
    assert!(!ignored(&patterns, "targets"));
    assert!(!ignored(&patterns, "a.swp.rs"));
}

#[test]
fn the_image_build_context_leaves_out_target_and_keeps_what_the_dockerfile_copies() {
    let root = workspace_root();
    let dockerfile = std::fs::read_to_string(root.join("deploy/Dockerfile")).unwrap();
    // The Dockerfile documents its build command; the context is its last word, taken from the
    // repository root.
    let command = dockerfile
        .lines()
        .find(|line| line.contains("docker build"))
        .expect("the Dockerfile documents how to build it");
    let context = root.join(command.split_whitespace().last().unwrap());
    let ignore_file = context.join(".dockerignore");
    let text = std::fs::read_to_string(&ignore_file).unwrap_or_else(|e| {
        panic!(
            "{} is the context's ignore file: {e}",
            ignore_file.display()
        )
    });
    let patterns = ignore_patterns(&text);

    for left_out in [
        "target",
        "target/release/nauthera-reconciler",
        ".git",
        ".git/HEAD",
        ".sandbox/kubeconfig",
        "shared/src/.lib.rs.swp",
        "README.md~",
        ".idea/workspace.xml",
        ".vscode/settings.json",
        "cli/.DS_Store",
    ] {
        assert!(
            ignored(&patterns, left_out),
            "{left_out} is sent with the context"
        );
    }

    // What the build stage copies from the context (not from another stage) must be there: every
    // file the repository holds under each source.
    let listing = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&context)
        .output()
        .expect("git runs");
    assert!(listing.status.success(), "git ls-files needs a checkout");
    let tracked: Vec<String> = String::from_utf8(listing.stdout)
        .unwrap()
        .split('\0')
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect();
    assert!(tracked.iter().any(|path| path == "Cargo.lock"));
    let mut sources = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let Some(arguments) = line.strip_prefix("COPY ") else {
            continue;
        };
        let words: Vec<&str> = arguments.split_whitespace().collect();
        if words.iter().any(|word| word.starts_with("--from")) {
            continue;
        }
        let paths: Vec<&str> = words.into_iter().filter(|w| !w.starts_with("--")).collect();
        let (_destination, copied) = paths.split_last().expect("COPY names a source");
        sources.extend(
            copied
                .iter()
                .map(|source| source.trim_matches('/').to_owned()),
        );
    }
    assert!(
        !sources.is_empty(),
        "the build stage copies from the context"
    );
    for source in &sources {
        let under = |path: &&String| {
            source == "." || *path == source || path.starts_with(&format!("{source}/"))
        };
        let dropped: Vec<&String> = tracked
            .iter()
            .filter(under)
            .filter(|path| ignored(&patterns, path))
            .collect();
        assert!(
            dropped.is_empty(),
            "COPY {source} needs files the ignore file leaves out: {dropped:?}"
        );
    }
}
