//! Scale: 10,000 custom objects listed and watched, against a baseline of serializing the
//! same objects. Run with `cargo bench -p nauthera-kube-emulator --bench scale`.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use nauthera_kube_emulator::Emulator;
use serde_json::{Value, json};

const OBJECTS: usize = 10_000;

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Issuer", "type": "string", "jsonPath": ".spec.issuer"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "issuer": {"type": "string"}, "redirectUris": {"type": "array", "items": {"type": "string"}},
                        "scopes": {"type": "array", "items": {"type": "string"}}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    })
}

fn report(what: &str, elapsed: Duration, bytes: Option<usize>) {
    let size = bytes
        .map(|b| format!(" ({:.1} MB)", b as f64 / 1e6))
        .unwrap_or_default();
    println!("{what:<58} {:>9.1} ms{size}", elapsed.as_secs_f64() * 1e3);
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::start().await.expect("the emulator starts");
    let kubeconfig =
        Kubeconfig::from_yaml(&emulator.kubeconfig(emulator.superuser_token(), "default"))
            .expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = Client::try_from(config).expect("client");

    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.patch(
        "gadgets.bench.example.com",
        &PatchParams::apply("bench"),
        &Patch::Apply(crd()),
    )
    .await
    .expect("CRD");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.example.com", "v1", "Gadget"),
        "gadgets",
    );
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let before = emulator.resource_version().to_string();

    let started = Instant::now();
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let gadgets = gadgets.clone();
            async move {
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "bench.example.com/v1", "kind": "Gadget",
                    "metadata": {"name": format!("gadget-{i:05}"), "labels": {"shard": (i % 10).to_string()}},
                    "spec": {"issuer": "https://id.example.com/org", "redirectUris": [format!("https://app{i}.example.com/callback")],
                        "scopes": ["openid", "profile", "email"]}
                }))
                .expect("object");
                gadgets.create(&PostParams::default(), &object).await.expect("create");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    report(
        &format!("create {OBJECTS} objects (16 concurrent requests)"),
        started.elapsed(),
        None,
    );

    // Baseline: what serializing the objects alone costs.
    let listed = gadgets.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), OBJECTS);
    let values: Vec<Value> = listed
        .items
        .iter()
        .map(|o| serde_json::to_value(o).expect("value"))
        .collect();
    let started = Instant::now();
    let baseline = serde_json::to_vec(&values).expect("serialize");
    report(
        "baseline: serde_json::to_vec of the same objects",
        started.elapsed(),
        Some(baseline.len()),
    );
    let started = Instant::now();
    let parsed: Vec<DynamicObject> = serde_json::from_slice(&baseline).expect("parse");
    report(
        "baseline: client-side parse into DynamicObject",
        started.elapsed(),
        None,
    );
    drop(parsed);

    let path = "/apis/bench.example.com/v1/namespaces/default/gadgets";
    let started = Instant::now();
    let text = client
        .request_text(http::Request::get(path).body(vec![]).expect("request"))
        .await
        .expect("raw list");
    report(
        "full list over HTTPS, raw bytes (no client parsing)",
        started.elapsed(),
        Some(text.len()),
    );
    // What `kubectl get` asks for: the list as a server-side Table, whole and in its pages.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let table_request = |uri: String| {
        http::Request::get(uri)
            .header(http::header::ACCEPT, table)
            .body(vec![])
            .expect("request")
    };
    let started = Instant::now();
    let text = client
        .request_text(table_request(path.to_owned()))
        .await
        .expect("table");
    report(
        "full list as a Table over HTTPS, raw bytes",
        started.elapsed(),
        Some(text.len()),
    );
    let started = Instant::now();
    let mut pages = 0;
    let mut token: Option<String> = None;
    loop {
        let mut uri = format!("{path}?limit=500");
        if let Some(t) = &token {
            uri.push_str(&format!("&continue={t}"));
        }
        let page: Value = serde_json::from_str(
            &client
                .request_text(table_request(uri))
                .await
                .expect("table page"),
        )
        .expect("a Table");
        pages += 1;
        token = page["metadata"]["continue"].as_str().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    report(
        &format!("Table in pages of 500 ({pages} pages), as kubectl get"),
        started.elapsed(),
        None,
    );
    let started = Instant::now();
    let listed = gadgets.list(&ListParams::default()).await.expect("list");
    report(
        "full list with kube-rs Api::list (client parses)",
        started.elapsed(),
        None,
    );
    assert_eq!(listed.items.len(), OBJECTS);
    let started = Instant::now();
    let mut pages = 0;
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = gadgets.list(&params).await.expect("page");
        pages += 1;
        token = page.metadata.continue_.clone();
        if token.is_none() {
            break;
        }
    }
    report(
        &format!("paged list, limit=500 ({pages} pages), as kube-runtime's watcher"),
        started.elapsed(),
        None,
    );
    let started = Instant::now();
    let selected = gadgets
        .list(&ListParams::default().labels("shard=3"))
        .await
        .expect("selected");
    report(
        "label-selected list (1,000 of 10,000)",
        started.elapsed(),
        None,
    );
    assert_eq!(selected.items.len(), OBJECTS / 10);

    let started = Instant::now();
    let mut stream = gadgets
        .watch(&WatchParams::default(), &before)
        .await
        .expect("watch")
        .boxed();
    let mut added = 0;
    while added < OBJECTS {
        if let WatchEvent::Added(_) = stream.try_next().await.expect("event").expect("open") {
            added += 1;
        }
    }
    report(
        &format!("watch replaying {OBJECTS} ADDED events (kube-rs parses)"),
        started.elapsed(),
        None,
    );

    emulator.shutdown().await;
}
