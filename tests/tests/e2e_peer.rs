//! The controller-runtime peer of the benchmark (`bench/peer/`) does the job it is measured on:
//! it registers OIDCClients with their finalizer, delivers each generated secret into an owned
//! Secret, records an Event, marks a change made on the server by someone else Drifted (and not
//! its own writes), and deletes the server's client before letting the manifest go. A yardstick
//! known correct; skipped with a message when Go is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nauthera_fake_server::Actor;
use nauthera_shared::catalog::Reason;
use nauthera_tests::bench::peer::{Peer, binary};
use nauthera_tests::e2e::{
    Stack, StackOptions, generated_client, secret_value, sha256_hex, status_of,
};

const FINALIZER: &str = "nauthera.io/finalizer";

async fn the_peer_registers_delivers_secrets_marks_drift_and_deletes() {
    let Some(program) = binary().expect("bench/peer/build.sh runs") else {
        eprintln!("skipped: Go is not installed, so the controller-runtime peer cannot be built");
        return;
    };
    let stack = Stack::start_with(StackOptions {
        start_reconciler: false,
        ..StackOptions::default()
    })
    .await;
    for name in ["alpha", "beta", "gamma"] {
        stack.apply(&generated_client(name)).await;
    }
    let peer = Peer::start(program, &stack, 2, &[stack.namespace().to_owned()])
        .await
        .expect("the peer starts");

    for name in ["alpha", "beta", "gamma"] {
        let client = stack.wait_reason(name, Reason::Registered).await;
        assert!(
            client
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER),
            "{name} holds the finalizer"
        );
        let status = status_of(&client);
        let secret = stack.secret(name).await.expect("the Secret is written");
        assert_eq!(
            secret_value(&secret, "clientId").as_deref(),
            status.client_id.as_deref()
        );
        let value = secret_value(&secret, "clientSecret").expect("a client secret");
        assert_eq!(
            stack.server.client_secret_hash(&stack.object_ref(name)),
            Some(sha256_hex(value.as_bytes())),
            "the Secret holds the secret the server generated for {name}"
        );
        let owner = secret.metadata.owner_references.unwrap_or_default();
        assert!(
            owner
                .iter()
                .any(|o| o.kind == "OIDCClient" && o.name == name)
        );
        // Events are written by their own tasks, after the Secret and the status.
        stack.wait_event(name, "Registered").await;
    }

    // A person's edit on the server is drift; the peer's own writes are not.
    let revision = stack
        .server
        .edit_client(
            &stack.object_ref("beta"),
            &Actor::dashboard("someone@example.com"),
            |spec| spec.display_name.push_str(" (edited)"),
        )
        .expect("the edit is made");
    let drifted = stack.wait_reason("beta", Reason::Drifted).await;
    let drift = status_of(&drifted)
        .drift
        .as_ref()
        .expect("the drift is shown");
    assert_eq!(drift.server_revision, revision);
    assert_eq!(drift.fields, vec!["spec.displayName".to_owned()]);
    for name in ["alpha", "gamma"] {
        let client = stack
            .manifest::<nauthera_shared::resources::OIDCClient>(name)
            .await;
        assert_eq!(
            client.as_ref().map(status_of).and_then(|s| s.reason),
            Some(Reason::Registered),
            "{name} is untouched"
        );
    }

    // A delete removes the server's client, then the finalizer.
    stack.delete_oidc_client("gamma").await;
    stack.wait_gone("gamma").await;
    assert!(stack.server.client(&stack.object_ref("gamma")).is_none());
    assert!(stack.server.client(&stack.object_ref("alpha")).is_some());
    peer.stop().await;
}

nauthera_tests::e2e_test!(the_peer_registers_delivers_secrets_marks_drift_and_deletes);
