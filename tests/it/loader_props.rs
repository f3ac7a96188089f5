//! The loader never panics, whatever the files hold, and every accepted plan
//! is ordered so that each release comes after all of its needs.

use proptest::prelude::*;

fn write_config(dir: &std::path::Path, cluster: &str, releases: &str) {
    std::fs::create_dir_all(dir.join("clusters/infra")).unwrap();
    std::fs::create_dir_all(dir.join("releases")).unwrap();
    std::fs::write(dir.join("clusters/infra/cluster.yaml"), cluster).unwrap();
    std::fs::write(dir.join("releases/r.yaml"), releases).unwrap();
}

/// YAML-shaped noise: keys of the real format, odd scalars, flow and block
/// collections, document markers, templates and broken quoting.
fn yamlish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("name: ".to_string()),
        Just("namespace: ".to_string()),
        Just("chart: ".to_string()),
        Just("needs: ".to_string()),
        Just("values: ".to_string()),
        Just("hooks:\n  postsync:\n    - ".to_string()),
        Just("rollout: {kind: DaemonSet, name: x}".to_string()),
        Just("{ repo: https://x, name: y, version: 1.0.0 }".to_string()),
        Just("{{cluster.values.x}}".to_string()),
        Just("\"{{env \\\"X\\\"}}\"".to_string()),
        Just("[a, b".to_string()),
        Just("---\n".to_string()),
        Just("\n".to_string()),
        Just("  ".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("!!binary ".to_string()),
        Just("'".to_string()),
        Just(": ".to_string()),
        "[a-z0-9./-]{0,12}",
    ];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn loader_never_panics(releases in yamlish(), cluster in yamlish()) {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), &format!("name: infra\n{cluster}"), &releases);
        let _ = bootstrap::config::load(dir.path(), "infra");
    }

    #[test]
    fn accepted_plans_are_ordered(needs in prop::collection::vec(prop::collection::vec(0usize..12, 0..3), 1..12)) {
        // Release i may only need releases with a smaller index: always a DAG.
        let mut text = String::new();
        for (i, ns) in needs.iter().enumerate() {
            let deps: Vec<String> = ns.iter().filter(|&&n| n < i).map(|n| format!("r{n}")).collect();
            text.push_str(&format!(
                "---\nname: r{i}\nnamespace: ns{}\nchart: {{ oci: oci://example.com/c/r{i}, version: 1.0.0 }}\nneeds: [{}]\n",
                i % 3,
                deps.join(", ")
            ));
        }
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), "name: infra\n", &text);
        let plan = bootstrap::config::load(dir.path(), "infra").expect("valid DAG loads");
        let position: std::collections::HashMap<_, _> =
            plan.releases.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).collect();
        for r in &plan.releases {
            for n in &r.needs {
                prop_assert!(position[n] < position[&r.id], "{} before its need {}", r.id, n);
            }
        }
    }
}
