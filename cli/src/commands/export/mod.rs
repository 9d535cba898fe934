//! `kubectl nauthera export`: runs `nauthera-reconciler export` in the reconciler's pod through
//! `kubectl exec`, where the reconciler's client certificate is, so that nobody needs the
//! server's credentials on their machine. Before it execs, it checks what kubectl exec would
//! only say in prose: that the reconciler's Deployment exists with a ready pod, and that the
//! caller may exec into pods there. The manifests go to stdout or `--output-file`; the export's
//! own messages (what was exported, what was skipped, why it failed) pass through on stderr.

use std::process::Stdio;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::Outcome;
use crate::cli::{ExportArgs, ExportSecrets, GlobalArgs};
use crate::cluster::Cluster;
use crate::cluster::control_plane::{RECONCILER_NAME, replicas_of, shard_deployment_name};
use crate::error::{CliError, describe_kube_error};

/// The reconciler's container in the shipped Deployment (`deploy/base/deployment.yaml`).
pub const RECONCILER_CONTAINER: &str = "reconciler";

pub async fn run(global: &GlobalArgs, args: &ExportArgs) -> Result<Outcome, CliError> {
    let cluster = Cluster::connect(global).await?;
    let namespace = &global.reconciler_namespace;
    let deployment = match &args.shard {
        Some(shard) => shard_deployment_name(shard),
        None => RECONCILER_NAME.to_owned(),
    };
    check_reconciler(&cluster, namespace, &deployment).await?;
    check_exec_allowed(&cluster, namespace).await?;
    let output = tokio::process::Command::new(kubectl())
        .args(exec_args(global, args, &deployment))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .await
        .map_err(|error| {
            CliError::Refused(format!(
                "cannot run kubectl ({error}); the export runs through `kubectl exec`, so \
                 kubectl must be on PATH"
            ))
        })?;
    if !output.status.success() {
        let code = output
            .status
            .code()
            .map_or_else(|| "a signal".to_owned(), |code| format!("exit code {code}"));
        return Err(CliError::Refused(format!(
            "the export in {namespace}/deploy/{deployment} failed ({code}); its message is \
             above"
        )));
    }
    match &args.output_file {
        Some(path) => std::fs::write(path, &output.stdout).map_err(CliError::Output)?,
        None => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&output.stdout)
                .and_then(|()| stdout.flush())
                .map_err(CliError::Output)?;
        }
    }
    Ok(Outcome::AllGood)
}

/// The kubectl the plugin was started by, else the one on PATH.
fn kubectl() -> std::ffi::OsString {
    std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into())
}

/// `kubectl [connection flags] exec -n NS deploy/NAME -c reconciler -- nauthera-reconciler
/// export [export flags]`: the plugin's connection flags go to kubectl, its export flags to
/// the export. `-n` names the namespace to export (without it, every namespace the grant
/// covers); the export's own file is the plugin's to write, so `--output` is never passed.
pub fn exec_args(global: &GlobalArgs, args: &ExportArgs, deployment: &str) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<&String>| {
        if let Some(value) = value {
            argv.push(name.to_owned());
            argv.push(value.clone());
        }
    };
    let kubeconfig = global
        .kubeconfig
        .as_ref()
        .map(|path| path.display().to_string());
    flag("--kubeconfig", kubeconfig.as_ref());
    flag("--context", global.context.as_ref());
    flag("--cluster", global.cluster.as_ref());
    flag("--user", global.user.as_ref());
    flag("--server", global.server.as_ref());
    flag("--tls-server-name", global.tls_server_name.as_ref());
    flag("--as", global.as_user.as_ref());
    for group in &global.as_groups {
        flag("--as-group", Some(group));
    }
    flag("--as-uid", global.as_uid.as_ref());
    if global.insecure_skip_tls_verify {
        argv.push("--insecure-skip-tls-verify".to_owned());
    }
    argv.extend([
        "exec".to_owned(),
        "-n".to_owned(),
        global.reconciler_namespace.clone(),
        format!("deploy/{deployment}"),
        "-c".to_owned(),
        RECONCILER_CONTAINER.to_owned(),
        "--".to_owned(),
        RECONCILER_NAME.to_owned(),
        "export".to_owned(),
    ]);
    if let Some(namespace) = global.namespace.as_ref().filter(|_| !global.all_namespaces) {
        argv.extend(["--namespace".to_owned(), namespace.clone()]);
    }
    for organization in &args.organizations {
        argv.extend(["--organization".to_owned(), organization.clone()]);
    }
    if args.manage {
        argv.push("--manage".to_owned());
    }
    argv.extend([
        "--secrets".to_owned(),
        match args.secrets {
            ExportSecrets::Generate => "generate",
            ExportSecrets::SecretRef => "secret-ref",
        }
        .to_owned(),
    ]);
    if let Some(namespace) = &args.organization_namespace {
        argv.extend(["--organization-namespace".to_owned(), namespace.clone()]);
    }
    argv
}

/// The reconciler's Deployment exists and has a ready pod to exec into.
async fn check_reconciler(
    cluster: &Cluster,
    namespace: &str,
    deployment: &str,
) -> Result<(), CliError> {
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), namespace);
    match api.get_opt(deployment).await {
        Ok(Some(found)) if replicas_of(&found).ready > 0 => Ok(()),
        Ok(Some(_)) => Err(CliError::Refused(format!(
            "Deployment {namespace}/{deployment} has no ready pod to run the export in; see \
             `kubectl nauthera status` for the reconciler"
        ))),
        Ok(None) => Err(CliError::Refused(format!(
            "no Deployment {namespace}/{deployment}: the reconciler does not run there; name its \
             namespace with --reconciler-namespace (and a shard with --shard)"
        ))),
        // Not allowed to read Deployments: kubectl exec finds the pod on its own.
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        Err(error) => {
            let (detail, hint) = describe_kube_error(&error);
            Err(CliError::Kube {
                what: format!("reading Deployment {namespace}/{deployment}"),
                detail,
                hint,
            })
        }
    }
}

/// `kubectl auth can-i create pods/exec -n <namespace>` for the caller.
async fn check_exec_allowed(cluster: &Cluster, namespace: &str) -> Result<(), CliError> {
    let api: Api<SelfSubjectAccessReview> = Api::all(cluster.client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some("create".to_owned()),
                resource: Some("pods".to_owned()),
                subresource: Some("exec".to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    match api.create(&PostParams::default(), &review).await {
        Ok(answer) if answer.status.as_ref().is_some_and(|s| !s.allowed) => {
            Err(CliError::Refused(format!(
                "you may not exec into pods in {namespace} (create pods/exec), which the export \
                 needs to run where the reconciler's certificate is; ask for a Role that allows \
                 it, or run `nauthera-reconciler export` yourself with the certificate \
                 (docs/export.md)"
            )))
        }
        // Allowed, or the review itself failed: kubectl exec will say.
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
