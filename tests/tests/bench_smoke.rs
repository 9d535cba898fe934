//! The benchmark program at a tiny size, so it cannot rot: every part runs and reports, for both
//! workloads (OIDCClients alone, and the mixed one of all four kinds, each measured twice and
//! summed up as medians), against the real binaries, the fake server and the emulator. No figure
//! is asserted (they are timings); only that each was measured.

use std::process::Command;

#[test]
fn the_benchmark_measures_every_part_at_a_tiny_size() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("results.json");
    let svg = out.path().join("plot.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_nauthera-bench"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "--workload",
            "clients,mixed",
            "--clients",
            "12",
            "--plugin-only",
            "30",
            "--namespaces",
            "3",
            "--cold-start-timeout",
            "2m",
            "--settle",
            "1s",
            "--steady-window",
            "2s",
            "--drift-edits",
            "2",
            "--drift-settle",
            "500ms",
            "--plugin-runs",
            "1",
            "--repeat",
            "2",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .expect("the benchmark runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the benchmark failed:\n{stdout}\n{stderr}"
    );
    for measure in [
        "cold start",
        "cold start CPU (reconciler + stand-ins)",
        "cold start against the registration-only floor",
        "reconciles per object",
        "steady server calls/min",
        "drift latency",
        "memory",
        "per object: wall ms; CPU ms; peak KiB",
        "plugin status -A through kubectl, table",
        "plugin status -A alone, json",
    ] {
        assert!(stdout.contains(measure), "no {measure:?} row in:\n{stdout}");
    }

    assert!(
        stdout.contains("| mixed ") && stdout.contains("manifests"),
        "no mixed rows in:\n{stdout}"
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Each workload twice, round by round, and the two runs of each summed up.
    let sizes = report["sizes"].as_array().unwrap();
    let workloads: Vec<&str> = sizes
        .iter()
        .map(|s| s["workload"].as_str().unwrap())
        .collect();
    assert_eq!(workloads, ["clients", "mixed", "clients", "mixed"]);
    let repeated = report["repeated"].as_array().unwrap();
    assert_eq!(repeated.len(), 2, "{repeated:?}");
    for (summary, workload) in repeated.iter().zip(["clients", "mixed"]) {
        assert_eq!(summary["workload"], workload, "{summary}");
        assert_eq!(summary["runs"], 2, "{summary}");
        assert_eq!(summary["wall_ratio"]["runs"], 2, "{summary}");
        assert_eq!(summary["drift_p95_ms"]["runs"], 2, "{summary}");
    }
    assert!(
        stdout.contains("median of 2 runs (of 2): cold start CPU / full floor"),
        "no median rows in:\n{stdout}"
    );
    let size = &report["sizes"][0];
    assert_eq!(size["workload"], "clients");
    assert_eq!(size["clients"], 12);
    assert_eq!(size["namespaces"], 3);
    let cold = &size["cold_start"];
    assert_eq!(cold["finished"], true, "{cold}");
    assert_eq!(cold["complete"], 12);
    assert!(cold["ratio"].as_f64().is_some());
    // CPU time comes in ticks of 10 ms: a floor of 12 clients may not reach one.
    assert!(
        cold["cpu"]["reconciler_seconds"].as_f64().unwrap() > 0.0,
        "{cold}"
    );
    for part in ["stand_ins_seconds", "floor_seconds", "floor_own_seconds"] {
        assert!(cold["cpu"][part].as_f64().is_some(), "{part}: {cold}");
    }
    // The floor's own process is a part of the floor's CPU, as the reconciler's is of its.
    assert!(
        cold["cpu"]["floor_own_seconds"].as_f64().unwrap()
            <= cold["cpu"]["floor_seconds"].as_f64().unwrap(),
        "{cold}"
    );
    assert!(cold["reconciles_per_object"].as_f64().unwrap() >= 1.0);
    assert_eq!(cold["floor_server_calls"]["ApplyClient"], 12);
    assert!(cold["server_calls"]["ApplyClient"].as_u64().unwrap() >= 12);
    assert_eq!(cold["floor_kube_requests"]["create secrets"], 12);
    assert_eq!(cold["floor_kube_requests"]["create events"], 12);
    assert_eq!(cold["floor_kube_requests"]["patch oidcclients"], 12);
    assert!(cold["floor_cpu_seconds"].as_f64().is_some(), "{cold}");
    let registration = &cold["registration_floor"];
    assert_eq!(registration["server_calls"]["ApplyClient"], 12);
    assert!(registration["ratio"].as_f64().is_some(), "{registration}");
    assert!(
        registration["kube_requests"]["create events"].is_null(),
        "{registration}"
    );
    assert!(
        cold["kube_requests"]["patch oidcclients/status"]
            .as_u64()
            .unwrap()
            >= 12
    );
    assert!(size["steady"]["window_seconds"].as_f64().unwrap() > 0.0);
    let drift = &size["drift"];
    assert_eq!(drift["edits"], 2);
    assert_eq!(drift["detected"], 2, "every edit shows as Drifted: {drift}");
    assert!(drift["reconciles_per_edit"]["max"].as_f64().unwrap() >= 1.0);
    let memory = &size["memory"];
    assert!(memory["cold_start_peak_kib"].as_u64().unwrap() > 0);
    assert!(memory["idle"]["rss_kib"].as_u64().unwrap() > 0);
    assert!(memory["floor"]["rss_kib"].as_u64().unwrap() > 0);
    assert!(size["per_object"]["cpu_ms"].as_f64().unwrap() > 0.0);
    for plugin in [&size["plugin"], &report["plugin_only"][0]] {
        let commands = plugin["commands"].as_array().unwrap();
        assert_eq!(commands.len(), 6);
        for command in commands {
            assert_eq!(command["failed_runs"], 0, "{command}");
            assert!(
                command["median_peak_kib"].as_u64().unwrap() > 0,
                "{command}"
            );
        }
        let ratios = plugin["ratios"].as_array().unwrap();
        assert_eq!(ratios.len(), 4);
        for ratio in ratios {
            assert!(ratio["cpu"].as_f64().unwrap() > 0.0, "{ratio}");
            assert!(ratio["peak_memory"].as_f64().unwrap() > 0.0, "{ratio}");
        }
    }
    assert_eq!(report["plugin_only"][0]["clients"], 30);

    mixed_was_measured(&report["sizes"][1]);

    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg")
            && plot.contains("<title>reconciler (clients), N = 12: ")
            && plot.contains("<title>reconciler (mixed), N = 12: ")
    );
}

/// The mixed workload at 12: one Organization the server does not hold at start, one Branding,
/// one IdentityProvider and nine OIDCClients (three with a brandingRef), every one registered in
/// order, and its floor making the same writes.
fn mixed_was_measured(size: &serde_json::Value) {
    assert_eq!(size["workload"], "mixed");
    assert_eq!(size["clients"], 12);
    let composition = &size["composition"];
    assert_eq!(composition["organizations"], 1, "{composition}");
    assert_eq!(composition["brandings"], 1, "{composition}");
    assert_eq!(composition["identity_providers"], 1, "{composition}");
    assert_eq!(composition["clients"], 9, "{composition}");
    assert_eq!(composition["clients_with_branding_ref"], 3, "{composition}");
    let cold = &size["cold_start"];
    assert_eq!(cold["finished"], true, "{cold}");
    assert_eq!(cold["complete"], 12);
    for (kind, count) in [
        ("Organization", 1),
        ("Branding", 1),
        ("IdentityProvider", 1),
        ("OIDCClient", 9),
    ] {
        assert_eq!(cold["complete_by_kind"][kind], count, "{cold}");
    }
    assert!(cold["ratio"].as_f64().is_some());
    for (method, count) in [
        ("ApplyOrganization", 1),
        ("ApplyBranding", 1),
        ("ApplyIdentityProvider", 1),
        ("ApplyClient", 9),
    ] {
        assert_eq!(cold["floor_server_calls"][method], count, "{cold}");
        assert!(
            cold["server_calls"][method].as_u64().unwrap_or(0) >= count,
            "{method}: {cold}"
        );
    }
    let floor_requests = &cold["floor_kube_requests"];
    assert_eq!(floor_requests["create secrets"], 9, "{floor_requests}");
    assert_eq!(floor_requests["get secrets"], 1, "{floor_requests}");
    for resource in [
        "organizations",
        "brandings",
        "identityproviders",
        "oidcclients",
    ] {
        let patches = &floor_requests[format!("patch {resource}/status")];
        assert!(
            patches.as_u64().unwrap_or(0) >= 1,
            "{resource}: {floor_requests}"
        );
        let patches = &cold["kube_requests"][format!("patch {resource}/status")];
        assert!(patches.as_u64().unwrap_or(0) >= 1, "{resource}: {cold}");
    }
    assert!(size["steady"]["window_seconds"].as_f64().unwrap() > 0.0);
    let drift = &size["drift"];
    assert_eq!(drift["detected"], 2, "every edit shows as Drifted: {drift}");
    let memory = &size["memory"];
    assert!(memory["idle"]["rss_kib"].as_u64().unwrap() > 0);
    assert!(memory["floor"]["rss_kib"].as_u64().unwrap() > 0);
    assert!(
        size["plugin"].is_null(),
        "the plugin is compared on clients only"
    );
}

/// The same program on a real control plane (a fresh kube-apiserver, etcd and
/// kube-controller-manager per stack): request counts come from the API server's `/metrics` and
/// the plane's own CPU is reported apart; the controller-runtime peer runs on a plane of its own
/// too (when Go is installed).
#[test]
fn the_benchmark_measures_on_the_real_control_plane_at_a_tiny_size() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("results.json");
    let output = Command::new(env!("CARGO_BIN_EXE_nauthera-bench"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "--control-plane",
            "real",
            "--clients",
            "12",
            "--plugin-only",
            "0",
            "--namespaces",
            "3",
            "--cold-start-timeout",
            "2m",
            "--settle",
            "1s",
            "--steady-window",
            "2s",
            "--drift-edits",
            "2",
            "--drift-settle",
            "500ms",
            "--plugin-runs",
            "0",
            "--peer",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(out.path().join("plot.svg"))
        .output()
        .expect("the benchmark runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the benchmark failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("| real ") && stdout.contains("cold start CPU of the control plane"),
        "no real-plane rows in:\n{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let size = &report["sizes"][0];
    assert_eq!(size["plane"], "real");
    assert!(
        !size["real_plane"]["api_server_flags"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let cold = &size["cold_start"];
    assert_eq!(cold["finished"], true, "{cold}");
    assert_eq!(cold["complete"], 12);
    // The API server's CPU during a cold start is never under one tick of 10 ms.
    assert!(
        cold["cpu"]["plane_seconds"].as_f64().unwrap() > 0.0,
        "{cold}"
    );
    assert!(
        cold["cpu"]["floor_plane_seconds"].as_f64().unwrap() > 0.0,
        "{cold}"
    );
    // Every client's requests together: at least the floor's own.
    assert!(
        cold["floor_kube_requests"]["create secrets"]
            .as_u64()
            .unwrap()
            >= 12,
        "{cold}"
    );
    assert!(
        cold["kube_requests"]["patch oidcclients/status"]
            .as_u64()
            .unwrap()
            >= 12,
        "{cold}"
    );
    assert_eq!(size["drift"]["detected"], 2, "{}", size["drift"]);
    let peer = &size["peer"];
    if !peer.is_null() {
        assert_eq!(peer["finished"], true, "{peer}");
        assert_eq!(peer["drift_detected"], 2, "{peer}");
        assert!(
            peer["cold_start_plane_cpu_seconds"].as_f64().unwrap() > 0.0,
            "{peer}"
        );
    }
}
