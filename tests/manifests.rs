//! The deployment manifests agree with the code: the scheduler
//! configuration points its extender at the address, verbs and mode the
//! extender serves, and no container runs privileged, as root, or as a
//! shell. (Schema validation is kubernetes-validate's job, in scripts/test.)

use serde::Deserialize;
use serde_yaml::Value;

fn documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

#[test]
fn the_scheduler_configuration_matches_the_extender() {
    let config_map = &documents("deploy/scheduler/scheduler-config.yaml")[0];
    let embedded = config_map["data"]["scheduler-config.yaml"]
        .as_str()
        .unwrap();
    let config: Value = serde_yaml::from_str(embedded).unwrap();
    assert_eq!(config["kind"], "KubeSchedulerConfiguration");
    assert_eq!(config["profiles"][0]["schedulerName"], "netaware-scheduler");
    let extender = &config["extenders"][0];
    assert_eq!(extender["urlPrefix"], "http://127.0.0.1:8888");
    // The routes the extender serves (scheduler/src/server.rs).
    assert_eq!(extender["filterVerb"], "filter");
    assert_eq!(extender["prioritizeVerb"], "prioritize");
    assert_eq!(extender["bindVerb"], "bind");
    assert_eq!(extender["nodeCacheCapable"], true);
    assert_eq!(
        extender["ignorable"], true,
        "a down extender must not block scheduling"
    );
    assert!(extender["weight"].as_i64().unwrap() > 0);

    let deployment = &documents("deploy/scheduler/deployment.yaml")[0];
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap();
    let sidecar = containers.iter().find(|c| c["name"] == "extender").unwrap();
    let command: Vec<&str> = sidecar["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(command.contains(&"--listen=127.0.0.1:8888"), "{command:?}");
    assert_eq!(command[0], "netaware-scheduler");
}

#[test]
fn no_container_runs_privileged_as_root_or_as_a_shell() {
    for path in ["deploy/scheduler/deployment.yaml"] {
        for doc in documents(path) {
            let pod = &doc["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{path}");
            for container in pod["containers"].as_sequence().unwrap() {
                let name = container["name"].as_str().unwrap();
                let security = &container["securityContext"];
                assert_ne!(security["privileged"], true, "{path} {name}");
                assert_eq!(security["allowPrivilegeEscalation"], false, "{path} {name}");
                assert_eq!(security["capabilities"]["drop"][0], "ALL", "{path} {name}");
                let program = container["command"][0].as_str().unwrap_or("");
                assert!(
                    !["sh", "bash", "/bin/sh", "/bin/bash"].contains(&program),
                    "{path} {name} runs a shell"
                );
            }
        }
    }
}
