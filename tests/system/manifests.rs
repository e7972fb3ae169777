//! The deployment (deploy/, rendered by `kubectl kustomize` as a user
//! installs it) agrees with the code and with least privilege: the
//! containers' command lines parse with the binaries' own flag parsers, the
//! scheduler configuration points at the address and verbs the extender
//! serves, no container runs privileged or as a shell, only the agent runs
//! as uid 0 and with NET_RAW alone, the monitors select what exists, and the
//! dashboard ConfigMap carries the dashboard file. (Schema validation of the
//! built-in kinds is kubernetes-validate's job, in scripts/test.)

use std::process::Command;

use clap::{CommandFactory, Parser};
use netaware::Cli;
use netaware::commands::Command as Service;
use netaware_agent::cli::AgentCommandLine;
use serde::Deserialize;
use serde_yaml::Value;

/// What `kubectl kustomize deploy/` renders: the base, the extender and
/// the Prometheus Operator's monitors.
fn rendered() -> Vec<Value> {
    render("deploy/")
}

/// The base with the topology publisher, as `kubectl kustomize
/// deploy/topology` renders it.
fn rendered_with_publisher() -> Vec<Value> {
    render("deploy/topology")
}

/// The TLS overlay as `kubectl kustomize deploy/tls` renders it.
fn rendered_tls() -> Vec<Value> {
    render("deploy/tls")
}

fn render(dir: &str) -> Vec<Value> {
    let output = Command::new("kubectl")
        .args(["kustomize", dir])
        .output()
        .expect("kubectl (scripts/test installs it)");
    assert!(
        output.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in the rendered base"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn container<'a>(workload: &'a Value, name: &str) -> &'a Value {
    workload["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// Every pod template in the base, with its object's kind and name.
fn pod_templates(objects: &[Value]) -> Vec<(String, &Value)> {
    objects
        .iter()
        .filter(|o| {
            ["Deployment", "DaemonSet", "StatefulSet"].contains(&o["kind"].as_str().unwrap())
        })
        .map(|o| {
            let name = format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            );
            (name, &o["spec"]["template"])
        })
        .collect()
}

/// `line` with each of `container`'s environment variables that a flag of
/// `command` reads turned into that flag.
fn with_env_flags(container: &Value, command: &clap::Command, line: &[String]) -> Vec<String> {
    let mut line = line.to_vec();
    for variable in container["env"].as_sequence().into_iter().flatten() {
        let Some(value) = variable["value"].as_str() else {
            continue; // from the downward API: expanded in the command
        };
        let name = variable["name"].as_str().unwrap();
        let flag = command
            .get_arguments()
            .find(|arg| arg.get_env().is_some_and(|env| env == name));
        if let Some(flag) = flag {
            line.push(format!("--{}={value}", flag.get_long().unwrap()));
        }
    }
    line
}

/// `line` (a container's command, from `netaware` on) with the
/// container's environment, parsed by the `netaware` binary's own parser.
fn parse(container: &Value, line: &[String]) -> Service {
    assert_eq!(line[0], "netaware", "{line:?}");
    let cli = Cli::command();
    let sub = cli
        .find_subcommand(&line[1])
        .unwrap_or_else(|| panic!("no command {:?}", line[1]));
    Cli::try_parse_from(with_env_flags(container, sub, line))
        .unwrap_or_else(|e| panic!("{e}"))
        .command
}

/// The agent's flags as Kubernetes would start it on node gpu-1 at
/// 10.1.2.3 (it expands $(NODE_NAME) and $(HOST_IP) first), parsed by the
/// `netaware-agent` binary's own parser.
fn agent_args(agent: &Value) -> netaware_agent::cli::AgentArgs {
    let expanded: Vec<String> = strings(&agent["command"])
        .iter()
        .map(|a| {
            a.replace("$(NODE_NAME)", "gpu-1")
                .replace("$(HOST_IP)", "10.1.2.3")
        })
        .collect();
    assert_eq!(expanded[0], "netaware-agent", "{expanded:?}");
    let line = with_env_flags(agent, &AgentCommandLine::command(), &expanded);
    AgentCommandLine::try_parse_from(line)
        .unwrap_or_else(|e| panic!("{e}"))
        .agent
}

fn collector_args(collector: &Value) -> netaware_collector::cli::CollectorArgs {
    match parse(collector, &strings(&collector["command"])) {
        Service::Collector(args) => args,
        other => panic!("the collector runs {other:?}"),
    }
}

fn extender_args(extender: &Value) -> netaware_scheduler::cli::SchedulerArgs {
    match parse(extender, &strings(&extender["command"])) {
        Service::Scheduler(args) => args,
        other => panic!("the extender runs {other:?}"),
    }
}

#[test]
fn everything_lands_in_the_netaware_namespace() {
    for objects in [rendered(), rendered_tls(), rendered_with_publisher()] {
        everything_lands_in_the_netaware_namespace_in(&objects);
    }
}

#[test]
fn every_role_binding_sits_beside_its_role() {
    for objects in [rendered(), rendered_tls(), rendered_with_publisher()] {
        for binding in objects.iter().filter(|o| o["kind"] == "RoleBinding") {
            let namespace = &binding["metadata"]["namespace"];
            let role = &binding["roleRef"]["name"];
            if binding["roleRef"]["kind"] == "ClusterRole" {
                continue;
            }
            // kube-system's own Role for reading the API server's
            // authentication config, which every second scheduler binds.
            let system_role =
                role == "extension-apiserver-authentication-reader" && namespace == "kube-system";
            let ours = objects.iter().any(|o| {
                o["kind"] == "Role"
                    && o["metadata"]["name"] == *role
                    && o["metadata"]["namespace"] == *namespace
            });
            assert!(
                system_role || ours,
                "RoleBinding {:?} in {namespace:?} names Role {role:?}, which is not there",
                binding["metadata"]["name"]
            );
        }
    }
}

fn everything_lands_in_the_netaware_namespace_in(objects: &[Value]) {
    for object in objects {
        let kind = object["kind"].as_str().unwrap();
        if ["Namespace", "ClusterRole", "ClusterRoleBinding"].contains(&kind) {
            continue;
        }
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
        // kube-scheduler reads its auth config in kube-system, as every
        // second scheduler does; the topology publisher writes Diktyo's
        // NetworkTopology in `default`, where the plugin reads it.
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let expected = if kind == "RoleBinding" && name == "netaware-scheduler-auth-reader" {
            "kube-system"
        } else if ["Role", "RoleBinding"].contains(&kind) && name == "netaware-topology-publisher" {
            "default"
        } else {
            "netaware"
        };
        assert_eq!(
            namespace, expected,
            "{kind}/{:?}",
            object["metadata"]["name"]
        );
    }
    assert_eq!(find(objects, "Namespace", "netaware")["kind"], "Namespace");
}

#[test]
fn the_agent_daemonset_runs_everywhere_with_net_raw_only() {
    let objects = rendered();
    let daemonset = find(&objects, "DaemonSet", "netaware-agent");
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(
        pod["dnsPolicy"], "ClusterFirstWithHostNet",
        "Service DNS on the host network"
    );
    let tolerations = pod["tolerations"].as_sequence().unwrap();
    assert!(
        tolerations
            .iter()
            .any(|t| t["operator"] == "Exists" && t.get("key").is_none()),
        "tolerates every taint (GPU nodes included): {tolerations:?}"
    );
    let agent = container(daemonset, "agent");
    let security = &agent["securityContext"];
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(strings(&security["capabilities"]["add"]), ["NET_RAW"]);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert!(agent["resources"]["requests"]["cpu"].is_string());
    assert!(agent["resources"]["limits"]["memory"].is_string());

    // Name and address from the downward API; the zone from the Node.
    let env = agent["env"].as_sequence().unwrap();
    let field = |name: &str| {
        env.iter().find(|e| e["name"] == name).unwrap()["valueFrom"]["fieldRef"]["fieldPath"]
            .clone()
    };
    assert_eq!(field("NODE_NAME"), "spec.nodeName");
    assert_eq!(field("HOST_IP"), "status.hostIP");
    // The command line parses with the agent's own flags.
    let args = agent_args(agent);
    assert!(args.zone_from_node && args.zone.is_none());
    assert_eq!(args.node, "gpu-1");
    assert_eq!(
        args.addresses,
        ["10.1.2.3".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(
        args.collector,
        "http://netaware-collector.netaware.svc:7470"
    );
    let metrics_port = agent["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .unwrap();
    assert_eq!(
        metrics_port["containerPort"].as_u64(),
        Some(u64::from(args.metrics_port))
    );

    // Its node proven by its pod's token, for the collector's audience,
    // as a projected volume that kubelet rotates.
    let token_file = args.token_file.as_ref().expect("--token-file");
    let token_file = token_file.to_str().unwrap();
    let volume = volume_holding(daemonset, agent, token_file);
    let source = &volume["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(
        source["audience"],
        netaware_collector::agent_tokens::AUDIENCE
    );
    assert!(token_file.ends_with(&format!("/{}", source["path"].as_str().unwrap())));
    assert!(source["expirationSeconds"].as_u64().unwrap() <= 3600);

    // RBAC: get on nodes, nothing more.
    let role = find(&objects, "ClusterRole", "netaware-agent");
    let rules = role["rules"].as_sequence().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(strings(&rules[0]["resources"]), ["nodes"]);
    assert_eq!(strings(&rules[0]["verbs"]), ["get"]);
    assert_eq!(pod["serviceAccountName"], "netaware-agent");
}

#[test]
fn the_collector_is_probed_over_grpc_and_reached_through_its_service() {
    let objects = rendered();
    let deployment = find(&objects, "Deployment", "netaware-collector");
    let collector = container(deployment, "collector");
    let args = collector_args(collector);
    let grpc_port = args.listen.port();
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        assert_eq!(
            collector[probe]["grpc"]["port"].as_u64(),
            Some(u64::from(grpc_port)),
            "{probe}"
        );
    }
    let service = find(&objects, "Service", "netaware-collector");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(
            &pod_labels[key.as_str().unwrap()],
            value,
            "the Service selects the collector"
        );
    }
    let ports = service["spec"]["ports"].as_sequence().unwrap();
    let port = |name: &str| {
        ports.iter().find(|p| p["name"] == name).unwrap()["port"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(port("grpc"), u64::from(grpc_port));
    assert_eq!(port("metrics"), u64::from(args.metrics_listen.port()));
    assert_eq!(deployment["spec"]["replicas"], 1, "one matrix");
    let pdb = find(&objects, "PodDisruptionBudget", "netaware-collector");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    // Zones from the Nodes, and each agent's node from its token: get on
    // nodes and create on tokenreviews, nothing more.
    assert!(args.zones_from_nodes && args.agent_tokens);
    let agents = find(&objects, "DaemonSet", "netaware-agent");
    assert_eq!(
        args.agent_service_account,
        format!(
            "system:serviceaccount:{}:{}",
            agents["metadata"]["namespace"].as_str().unwrap(),
            agents["spec"]["template"]["spec"]["serviceAccountName"]
                .as_str()
                .unwrap()
        ),
        "the agents' tokens are the ones taken"
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["automountServiceAccountToken"],
        true
    );
    let role = find(&objects, "ClusterRole", "netaware-collector");
    let rules = role["rules"].as_sequence().unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(strings(&rules[0]["resources"]), ["nodes"]);
    assert_eq!(strings(&rules[0]["verbs"]), ["get"]);
    assert_eq!(strings(&rules[1]["apiGroups"]), ["authentication.k8s.io"]);
    assert_eq!(strings(&rules[1]["resources"]), ["tokenreviews"]);
    assert_eq!(strings(&rules[1]["verbs"]), ["create"]);
    let binding = find(&objects, "ClusterRoleBinding", "netaware-collector");
    assert_eq!(binding["roleRef"]["name"], "netaware-collector");
    assert_eq!(
        binding["subjects"][0]["name"],
        deployment["spec"]["template"]["spec"]["serviceAccountName"]
    );
}

#[test]
fn the_collector_saves_its_state_on_a_volume_that_follows_it() {
    for objects in [rendered(), rendered_tls()] {
        let deployment = find(&objects, "Deployment", "netaware-collector");
        let collector = container(deployment, "collector");
        let state_dir = collector_args(collector)
            .state_dir
            .expect("the collector saves its state");
        let mount = collector["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"].as_str() == state_dir.to_str())
            .expect("the state directory is a mounted volume");
        assert_ne!(mount["readOnly"], true);
        let pod = &deployment["spec"]["template"]["spec"];
        let volume = pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        let claim = volume["persistentVolumeClaim"]["claimName"]
            .as_str()
            .expect("the state lives on a claim, not on the node");
        let pvc = find(&objects, "PersistentVolumeClaim", claim);
        assert_eq!(strings(&pvc["spec"]["accessModes"]), ["ReadWriteOnce"]);
        assert!(pvc["spec"]["resources"]["requests"]["storage"].is_string());
        // One writer: the old pod lets go of the volume before a new one
        // starts.
        assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
        assert_eq!(
            pod["securityContext"]["fsGroup"], pod["securityContext"]["runAsGroup"],
            "the non-root collector can write the volume"
        );
    }
}

#[test]
fn the_scheduler_configuration_matches_the_extender() {
    let objects = rendered();
    let config_map = find(&objects, "ConfigMap", "netaware-scheduler-config");
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

    let deployment = find(&objects, "Deployment", "netaware-scheduler");
    let args = extender_args(container(deployment, "extender"));
    assert_eq!(args.listen.to_string(), "127.0.0.1:8888");
    assert_eq!(args.metrics_listen.unwrap().to_string(), "0.0.0.0:9472");
    assert_eq!(
        args.collector,
        "http://netaware-collector.netaware.svc:7470"
    );
}

#[test]
fn no_container_runs_privileged_or_as_a_shell_and_only_the_agent_as_root() {
    for (objects, workloads) in [
        (rendered(), 3),
        (rendered_tls(), 3),
        (rendered_with_publisher(), 4),
    ] {
        no_container_runs_privileged_or_as_a_shell_in(&objects, workloads);
    }
}

fn no_container_runs_privileged_or_as_a_shell_in(objects: &[Value], workloads: usize) {
    let templates = pod_templates(objects);
    assert_eq!(
        templates.len(),
        workloads,
        "agent, collector, scheduler (and publisher)"
    );
    for (workload, template) in templates {
        let pod = &template["spec"];
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{workload}"
        );
        for container in pod["containers"].as_sequence().unwrap() {
            let name = format!("{workload} {}", container["name"].as_str().unwrap());
            let security = &container["securityContext"];
            assert_ne!(security["privileged"], true, "{name}");
            assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
            assert_eq!(
                strings(&security["capabilities"]["drop"]),
                ["ALL"],
                "{name}"
            );
            let program = container["command"][0].as_str().unwrap_or("");
            assert!(
                !["sh", "bash", "/bin/sh", "/bin/bash"].contains(&program),
                "{name} runs a shell"
            );
            if workload != "DaemonSet/netaware-agent" {
                assert!(
                    security["capabilities"]["add"].is_null(),
                    "{name} adds capabilities"
                );
                assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
                assert_ne!(security["runAsUser"], 0, "{name}");
            }
        }
    }
}

/// Whether `object` is one of the Prometheus Operator's kinds.
fn of_the_operator(object: &Value) -> bool {
    object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
}

#[test]
fn the_base_needs_no_crd_and_the_stack_s_monitors_carry_its_release_label() {
    // deploy/base: the agents, the collector and the dashboard; no kind of
    // the Operator's, no extender.
    let base = render("deploy/base");
    assert!(!base.iter().any(of_the_operator));
    find(&base, "DaemonSet", "netaware-agent");
    find(&base, "Deployment", "netaware-collector");
    find(&base, "ConfigMap", "netaware-dashboard");
    assert!(
        !base
            .iter()
            .any(|o| o["metadata"]["name"] == "netaware-scheduler")
    );
    // deploy/kube-prometheus-stack: deploy/ with the release label on the
    // monitors and the rules, and nothing else changed.
    let plain = rendered();
    let stack = render("deploy/kube-prometheus-stack");
    assert_eq!(stack.len(), plain.len());
    assert_eq!(stack.iter().filter(|o| of_the_operator(o)).count(), 4);
    for (labelled, as_is) in stack.iter().zip(&plain) {
        let release = &labelled["metadata"]["labels"]["release"];
        if of_the_operator(labelled) {
            assert_eq!(release, "kube-prometheus-stack", "{labelled:?}");
            let mut unlabelled = labelled.clone();
            unlabelled["metadata"]["labels"]
                .as_mapping_mut()
                .unwrap()
                .remove("release");
            assert_eq!(&unlabelled, as_is);
        } else {
            assert_eq!(labelled, as_is);
        }
    }
}

#[test]
fn the_monitors_select_what_exists_and_the_dashboard_ships_as_is() {
    let objects = rendered();
    let labels_of = |kind: &str, name: &str| {
        let object = find(&objects, kind, name);
        match kind {
            "Service" => object["metadata"]["labels"].clone(),
            _ => object["spec"]["template"]["metadata"]["labels"].clone(),
        }
    };
    let selects = |selector: &Value, labels: &Value| {
        selector["matchLabels"]
            .as_mapping()
            .unwrap()
            .iter()
            .all(|(k, v)| &labels[k.as_str().unwrap()] == v)
    };
    // The collector's Service, by its metrics port.
    let monitor = find(&objects, "ServiceMonitor", "netaware-collector");
    assert!(selects(
        &monitor["spec"]["selector"],
        &labels_of("Service", "netaware-collector")
    ));
    let service = find(&objects, "Service", "netaware-collector");
    let endpoint_port = &monitor["spec"]["endpoints"][0]["port"];
    assert!(
        service["spec"]["ports"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|p| &p["name"] == endpoint_port)
    );
    // The agents and the scheduler, by their pods' metrics ports.
    for (kind, name, container_name) in [
        ("DaemonSet", "netaware-agent", "agent"),
        ("Deployment", "netaware-scheduler", "extender"),
    ] {
        let monitor = find(&objects, "PodMonitor", name);
        assert!(
            selects(&monitor["spec"]["selector"], &labels_of(kind, name)),
            "{name}"
        );
        let port = &monitor["spec"]["podMetricsEndpoints"][0]["port"];
        let ports = container(find(&objects, kind, name), container_name)["ports"].clone();
        assert!(
            ports
                .as_sequence()
                .unwrap()
                .iter()
                .any(|p| &p["name"] == port),
            "{name} has no port {port:?}"
        );
    }
    // The alert rules are the file tests/observability.rs checks.
    let rules = find(&objects, "PrometheusRule", "netaware");
    assert!(
        rules["spec"]["groups"][0]["rules"]
            .as_sequence()
            .unwrap()
            .len()
            >= 4
    );

    let dashboard = find(&objects, "ConfigMap", "netaware-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: serde_json::Value =
        serde_json::from_str(dashboard["data"]["netaware.json"].as_str().unwrap()).unwrap();
    let file: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("deploy/base/grafana/netaware.json").unwrap(),
    )
    .unwrap();
    assert_eq!(shipped, file);
}

/// The programs the Dockerfile copies into the image.
fn image_programs() -> Vec<String> {
    let dockerfile = std::fs::read_to_string("Dockerfile").unwrap();
    dockerfile
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("target/release/"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_image_holds_every_program_the_manifests_run_and_runs_as_non_root() {
    let programs = image_programs();
    // Each is a binary the workspace builds.
    let metadata = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .output()
        .unwrap();
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    let binaries: Vec<&str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .filter(|t| t["kind"][0] == "bin")
        .filter_map(|t| t["name"].as_str())
        .collect();
    for program in &programs {
        assert!(
            binaries.contains(&program.as_str()),
            "{program} is not a binary of the workspace: {binaries:?}"
        );
        assert!(
            std::fs::read_to_string("Dockerfile")
                .unwrap()
                .contains(&format!("--bin {program}")),
            "the Dockerfile copies {program} without building it"
        );
    }
    let objects = rendered_with_publisher();
    for (workload, template) in pod_templates(&objects) {
        for container in template["spec"]["containers"].as_sequence().unwrap() {
            if !container["image"].as_str().unwrap().starts_with("netaware") {
                continue;
            }
            let program = container["command"][0].as_str().unwrap();
            assert!(
                programs.iter().any(|p| p == program),
                "{workload} runs {program}, not in the image: {programs:?}"
            );
        }
    }
    let dockerfile = std::fs::read_to_string("Dockerfile").unwrap();
    let last_user = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back();
    assert_eq!(
        last_user,
        Some("65532:65532"),
        "the image runs as non-root by default"
    );
}

/// The volume of `workload`'s pod that holds `path` in `container`'s
/// mounts (read-only).
fn volume_holding<'a>(workload: &'a Value, container: &Value, path: &str) -> &'a Value {
    let mount = container["volumeMounts"]
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|m| path.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap())))
        .unwrap_or_else(|| panic!("{path} is in no volume of {:?}", container["name"]));
    assert_eq!(mount["readOnly"], true, "{path}");
    workload["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap()
}

/// The TLS flags' three files, each in a volume of the container.
fn tls_volumes<'a>(
    workload: &'a Value,
    container: &Value,
    tls: &netaware_runtime::tls::TlsArgs,
) -> Vec<&'a Value> {
    [&tls.tls_ca, &tls.tls_cert, &tls.tls_key]
        .into_iter()
        .map(|path| {
            let path = path.as_ref().expect("every TLS flag set").to_str().unwrap();
            volume_holding(workload, container, path)
        })
        .collect()
}

/// The names `netaware certs` puts in the certificate of `dir`.
fn certificate_names(dir: &str) -> Vec<String> {
    netaware::commands::certs::plan(&[], "netaware")
        .unwrap()
        .into_iter()
        .find(|spec| spec.dir == dir)
        .unwrap()
        .names
}

fn url_host(url: &str) -> &str {
    let rest = url.strip_prefix("https://").expect("an https:// URL");
    rest.split([':', '/']).next().unwrap()
}

#[test]
fn under_tls_every_process_has_its_certificate_and_the_ca() {
    let objects = rendered_tls();

    // Agents: the node's own certificate, from the node's disk.
    let daemonset = find(&objects, "DaemonSet", "netaware-agent");
    let agent = container(daemonset, "agent");
    let args = agent_args(agent);
    for volume in tls_volumes(daemonset, agent, &args.tls) {
        assert_eq!(volume["hostPath"]["path"], "/etc/netaware/pki");
    }
    assert!(
        certificate_names("collector").contains(&url_host(&args.collector).to_owned()),
        "the agents dial a name the collector's certificate holds: {}",
        args.collector
    );

    // The collector: with a CA, so client certificates are required.
    let deployment = find(&objects, "Deployment", "netaware-collector");
    let collector = container(deployment, "collector");
    let args = collector_args(collector);
    assert!(args.tls.tls_ca.is_some(), "mutual TLS");
    for volume in tls_volumes(deployment, collector, &args.tls) {
        assert_eq!(volume["secret"]["secretName"], "netaware-collector-tls");
    }

    // The extender.
    let deployment = find(&objects, "Deployment", "netaware-scheduler");
    let extender = container(deployment, "extender");
    let args = extender_args(extender);
    for volume in tls_volumes(deployment, extender, &args.tls) {
        assert_eq!(volume["secret"]["secretName"], "netaware-scheduler-tls");
    }
    assert!(certificate_names("collector").contains(&url_host(&args.collector).to_owned()));
    // The Secrets' files are readable by the non-root processes' group.
    for name in ["netaware-collector", "netaware-scheduler"] {
        let pod = &find(&objects, "Deployment", name)["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["fsGroup"], 65532, "{name}");
        assert_eq!(pod["securityContext"]["runAsGroup"], 65532, "{name}");
    }
}

#[test]
fn under_tls_every_probe_and_every_scrape_is_https() {
    let objects = rendered_tls();
    for (workload, template) in pod_templates(&objects) {
        for container in template["spec"]["containers"].as_sequence().unwrap() {
            for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
                let probe = &container[probe];
                if probe.is_null() {
                    continue;
                }
                // kubelet's gRPC probes cannot speak TLS.
                assert!(probe["grpc"].is_null(), "{workload}: {probe:?}");
                assert_eq!(probe["httpGet"]["scheme"], "HTTPS", "{workload}: {probe:?}");
            }
        }
    }
    let base = rendered();
    for (kind, name, list) in [
        ("ServiceMonitor", "netaware-collector", "endpoints"),
        ("PodMonitor", "netaware-agent", "podMetricsEndpoints"),
        ("PodMonitor", "netaware-scheduler", "podMetricsEndpoints"),
    ] {
        let endpoint = &find(&objects, kind, name)["spec"][list][0];
        let plain = &find(&base, kind, name)["spec"][list][0];
        assert_eq!(endpoint["port"], plain["port"], "{name}");
        assert_eq!(endpoint["scheme"], "https", "{name}");
        assert_eq!(endpoint["tlsConfig"]["ca"]["secret"]["name"], "netaware-ca");
        // Checked by name: a Service name the certificate holds, or (the
        // agents, on the host network) the node IP Prometheus dials.
        if let Some(server) = endpoint["tlsConfig"]["serverName"].as_str() {
            let dir = name.trim_start_matches("netaware-");
            assert!(
                certificate_names(dir).contains(&server.to_owned()),
                "{name}"
            );
        } else {
            assert_eq!(name, "netaware-agent");
        }
        assert_ne!(endpoint["tlsConfig"]["insecureSkipVerify"], true);
    }
}

#[test]
fn under_tls_kube_scheduler_calls_the_extender_over_https_and_nothing_else_changes() {
    let config = |objects: &[Value]| -> Value {
        let config_map = find(objects, "ConfigMap", "netaware-scheduler-config");
        serde_yaml::from_str(
            config_map["data"]["scheduler-config.yaml"]
                .as_str()
                .unwrap(),
        )
        .unwrap()
    };
    let objects = rendered_tls();
    let tls = config(&objects);
    let mut expected = config(&rendered());
    let extender = &tls["extenders"][0];
    assert_eq!(extender["urlPrefix"], "https://127.0.0.1:8888");
    assert!(certificate_names("scheduler").contains(&"127.0.0.1".to_owned()));
    assert_eq!(extender["enableHTTPS"], true);
    let ca_file = extender["tlsConfig"]["caFile"].as_str().unwrap();
    let deployment = find(&objects, "Deployment", "netaware-scheduler");
    let volume = volume_holding(deployment, container(deployment, "kube-scheduler"), ca_file);
    assert_eq!(volume["secret"]["secretName"], "netaware-scheduler-tls");
    expected["extenders"][0]["urlPrefix"] = extender["urlPrefix"].clone();
    expected["extenders"][0]["enableHTTPS"] = extender["enableHTTPS"].clone();
    expected["extenders"][0]["tlsConfig"] = extender["tlsConfig"].clone();
    assert_eq!(tls, expected);
}

#[test]
fn the_topology_publisher_reaches_the_collector_and_may_write_only_what_it_publishes() {
    let objects = rendered_with_publisher();
    let deployment = find(&objects, "Deployment", "netaware-topology-publisher");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let container = container(deployment, "publisher");
    let args = match parse(container, &strings(&container["command"])) {
        Service::PublishTopology(args) => args,
        other => panic!("the publisher runs {other:?}"),
    };
    // The collector's Service, on its gRPC port.
    let service = find(&objects, "Service", "netaware-collector");
    let grpc_port = service["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "grpc")
        .unwrap()["port"]
        .as_u64()
        .unwrap();
    assert_eq!(
        args.target.collector,
        format!("http://netaware-collector.netaware.svc:{grpc_port}")
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "netaware-topology-publisher");

    // Its rights: Nodes read and patched (labels, the fault taint), never
    // created or deleted;
    // HyperNodes deleted (blocks that are no more); Diktyo's object only
    // in the namespace it writes it to.
    let rules = |kind: &str, name: &str| -> Vec<(String, Vec<String>)> {
        find(&objects, kind, name)["rules"]
            .as_sequence()
            .unwrap()
            .iter()
            .flat_map(|rule| {
                let verbs = strings(&rule["verbs"]);
                strings(&rule["resources"])
                    .into_iter()
                    .map(move |resource| (resource, verbs.clone()))
            })
            .collect()
    };
    let cluster = rules("ClusterRole", "netaware-topology-publisher");
    let verbs_of = |rules: &[(String, Vec<String>)], resource: &str| {
        rules
            .iter()
            .find(|(r, _)| r == resource)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no rule for {resource}"))
    };
    assert_eq!(verbs_of(&cluster, "nodes"), ["get", "list", "patch"]);
    assert_eq!(verbs_of(&cluster, "topologies"), ["get", "create", "patch"]);
    assert_eq!(
        verbs_of(&cluster, "hypernodes"),
        ["get", "list", "create", "patch", "delete"]
    );
    // Events on the Nodes a network fault is about: created, never read.
    assert_eq!(verbs_of(&cluster, "events"), ["create"]);
    assert_eq!(cluster.len(), 4, "{cluster:?}");
    let role = find(&objects, "Role", "netaware-topology-publisher");
    assert_eq!(
        role["metadata"]["namespace"],
        args.render.diktyo_namespace.as_str()
    );
    let namespaced = rules("Role", "netaware-topology-publisher");
    assert_eq!(
        namespaced,
        [(
            "networktopologies".to_owned(),
            vec!["get".to_owned(), "create".to_owned(), "patch".to_owned()]
        )]
    );
    // Off by default: the plain base has no publisher.
    assert!(
        rendered()
            .iter()
            .all(|o| o["metadata"]["name"] != "netaware-topology-publisher")
    );
}

/// deploy/rails: every agent finds its address on each rail by the same
/// arguments, and the extender follows each rail, placing unlabelled pods
/// by the primary network as before.
#[test]
fn the_rails_overlay_measures_each_rail_and_the_extender_follows_them() {
    let objects = render("deploy/rails");
    let agent = container(find(&objects, "DaemonSet", "netaware-agent"), "agent");
    let rules: Vec<String> = agent_args(agent)
        .networks
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(rules, ["rail-0=172.16.0.0/16", "rail-1=172.17.0.0/16"]);
    let extender = container(
        find(&objects, "Deployment", "netaware-scheduler"),
        "extender",
    );
    let args = extender_args(extender);
    let followed: Vec<&str> = args.networks.iter().map(|n| n.as_str()).collect();
    assert_eq!(followed, ["rail-0", "rail-1"]);
    assert_eq!(args.default_network.as_str(), "primary");
    // Nothing else changes: the base's objects, one for one.
    let names = |objects: &[Value]| -> Vec<String> {
        let mut names: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&objects), names(&rendered()));
}

#[test]
fn the_network_policy_admits_the_collector_s_clients_to_its_ports() {
    let objects = render("deploy/network-policy");
    let policy = find(&objects, "NetworkPolicy", "netaware-collector");
    let collector = find(&objects, "Deployment", "netaware-collector");
    // It selects the collector's pods, by their labels.
    let labels = &collector["spec"]["template"]["metadata"]["labels"];
    let selects = |selector: &Value, labels: &Value| {
        selector["matchLabels"]
            .as_mapping()
            .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels[k] == *v))
    };
    assert!(
        selects(&policy["spec"]["podSelector"], labels),
        "{policy:?}"
    );
    assert_eq!(strings(&policy["spec"]["policyTypes"]), ["Ingress"]);

    // Every port it opens is one the collector listens on.
    let ports: Vec<String> = container(collector, "collector")["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let rules = policy["spec"]["ingress"].as_sequence().unwrap();
    let opened: Vec<String> = rules
        .iter()
        .flat_map(|rule| rule["ports"].as_sequence().unwrap())
        .map(|p| p["port"].as_str().expect("named ports").to_owned())
        .collect();
    assert_eq!(opened, ["grpc", "metrics"]);
    assert!(opened.iter().all(|p| ports.contains(p)), "{ports:?}");

    // The gRPC port's pod selectors are the extender's and the
    // publisher's pods, as their workloads label them.
    let with_publisher = rendered_with_publisher();
    let grpc_from = rules[0]["from"].as_sequence().unwrap();
    for workload in ["netaware-scheduler", "netaware-topology-publisher"] {
        let template = &find(&with_publisher, "Deployment", workload)["spec"]["template"];
        let pods = &template["metadata"]["labels"];
        assert!(
            grpc_from
                .iter()
                .any(|peer| selects(&peer["podSelector"], pods)),
            "{workload} may not reach the collector"
        );
    }
    // And the nodes' addresses, where the host-network agents come from.
    assert!(
        grpc_from
            .iter()
            .any(|peer| peer["ipBlock"]["cidr"].is_string())
    );
}

#[test]
fn with_cert_manager_the_collector_serves_its_certificate_and_clients_check_it_against_its_ca() {
    let objects = render("deploy/cert-manager");
    // The collector's certificate, from netaware's own CA, names what the
    // clients dial.
    let certificate = find(&objects, "Certificate", "netaware-collector");
    assert_eq!(certificate["spec"]["secretName"], "netaware-collector-tls");
    let names = strings(&certificate["spec"]["dnsNames"]);
    let issuer = &certificate["spec"]["issuerRef"]["name"];
    let ca_issuer = find(&objects, "Issuer", issuer.as_str().unwrap());
    let ca = find(&objects, "Certificate", "netaware-ca");
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(
        ca_issuer["spec"]["ca"]["secretName"],
        ca["spec"]["secretName"]
    );

    // The collector: its certificate and key, no CA (no client
    // certificates: agents are proven by their tokens).
    let deployment = find(&objects, "Deployment", "netaware-collector");
    let collector = container(deployment, "collector");
    let args = collector_args(collector);
    assert!(args.tls.tls_ca.is_none());
    assert!(args.agent_tokens, "node identity by token stays on");
    for path in [&args.tls.tls_cert, &args.tls.tls_key] {
        let path = path
            .as_ref()
            .expect("the certificate and key")
            .to_str()
            .unwrap();
        let volume = volume_holding(deployment, collector, path);
        assert_eq!(volume["secret"]["secretName"], "netaware-collector-tls");
    }

    // Agents and the extender: an https URL the certificate names, and
    // the CA read from the collector's Secret, its ca.crt and nothing else.
    let clients = [
        ("DaemonSet", "netaware-agent", "agent"),
        ("Deployment", "netaware-scheduler", "extender"),
    ];
    for (kind, name, container_name) in clients {
        let workload = find(&objects, kind, name);
        let client = container(workload, container_name);
        let (url, tls) = match kind {
            "DaemonSet" => {
                let args = agent_args(client);
                (args.collector, args.tls)
            }
            _ => {
                let args = extender_args(client);
                (args.collector, args.tls)
            }
        };
        assert!(names.contains(&url_host(&url).to_owned()), "{name}: {url}");
        assert!(tls.tls_cert.is_none(), "{name} presents no certificate");
        let ca = tls.tls_ca.expect("the CA").to_str().unwrap().to_owned();
        let volume = volume_holding(workload, client, &ca);
        assert_eq!(volume["secret"]["secretName"], "netaware-collector-tls");
        let items = volume["secret"]["items"].as_sequence().unwrap();
        assert_eq!(items.len(), 1, "{name}: only ca.crt");
        assert_eq!(items[0]["key"], "ca.crt");
        assert!(ca.ends_with(items[0]["path"].as_str().unwrap()));
    }
    // Prometheus checks the collector against the same CA.
    let monitor = find(&objects, "ServiceMonitor", "netaware-collector");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["tlsConfig"]["ca"]["secret"]["name"],
        "netaware-collector-tls"
    );
    assert!(
        names.contains(
            &endpoint["tlsConfig"]["serverName"]
                .as_str()
                .unwrap()
                .to_owned()
        )
    );
}
