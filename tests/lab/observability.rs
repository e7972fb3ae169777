//! The dashboard and the alerts against the real thing.
//!
//! - The alert rules (the `spec` of deploy/components/monitoring/prometheus-rule.yaml,
//!   a plain Prometheus rules file) pass `promtool check rules` and the unit
//!   tests in tests/prometheus/alerts.test.yml (`promtool test rules`).
//! - The dashboard (deploy/base/grafana/netaware.json) takes its data source from
//!   its `datasource` variable in every panel and query.
//! - On the lab's default topology, a real Prometheus (Debian's package) in
//!   the control host scrapes the real collector, the nine agents and a
//!   scheduler extender that is being called; every query of every panel
//!   returns data, and every alert fires in the scenario built for it (a
//!   lossy host, its links and its node fault, a zone cut off, ICMP dropped in every host,
//!   an agent killed, the collector killed; a failing save is driven
//!   through its metric by tests/lab/full_disk.rs and the unit tests),
//!   with the rules' `for` shortened to seconds (the unit tests hold the
//!   real ones).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use netaware::lab_system::{AgentTiming, COLLECTOR_PORT, LabSystem};
use netaware_lab::{Faults, Topology, root_or_skip};
use netaware_scheduler::cache::ScoreCache;
use netaware_scheduler::placements::Placements;
use netaware_scheduler::server::Extender;
use netaware_testkit::prometheus::{self, prometheus_get, query};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const RULES: &str = "deploy/components/monitoring/prometheus-rule.yaml";
const RULE_TESTS: &str = "tests/prometheus/alerts.test.yml";
const DASHBOARD: &str = "deploy/base/grafana/netaware.json";
const PROMETHEUS_PORT: u16 = 9090;
/// What the tests put for Grafana's `$__rate_interval` (four scrapes at
/// least, as Grafana computes it; the test scrapes every second).
const RATE_INTERVAL: &str = "30s";

/// The rules file inside the PrometheusRule, with every rule's `for` set to
/// `hold` when given.
fn rules_file(hold: Option<&str>) -> String {
    let text = std::fs::read_to_string(RULES).unwrap();
    let rule: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut spec = rule["spec"].clone();
    if let Some(hold) = hold {
        for group in spec["groups"].as_sequence_mut().unwrap() {
            for rule in group["rules"].as_sequence_mut().unwrap() {
                rule["for"] = hold.into();
            }
        }
    }
    serde_yaml::to_string(&spec).unwrap()
}

/// Runs promtool; `None` when it is missing outside CI.
fn promtool(args: &[&str]) -> Option<Output> {
    match Command::new("promtool").args(args).output() {
        Ok(output) => Some(output),
        Err(err) => {
            assert!(
                std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
                "promtool is needed in CI: {err}"
            );
            eprintln!("skipping: no promtool ({err})");
            None
        }
    }
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("netaware-rules.yml");
    std::fs::write(&rules, rules_file(None)).unwrap();
    // The unit tests name the rules file beside them.
    let tests = dir.path().join("alerts.test.yml");
    std::fs::copy(RULE_TESTS, &tests).unwrap();
    for args in [
        ["check", "rules", rules.to_str().unwrap()],
        ["test", "rules", tests.to_str().unwrap()],
    ] {
        let Some(output) = promtool(&args) else {
            return;
        };
        assert!(
            output.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The dashboard file.
fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(DASHBOARD).unwrap()).unwrap()
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(nested);
        }
    }
    all
}

/// Every query of every panel, as (panel title, PromQL with Grafana's
/// variables filled in the way Grafana fills them: all zones, the rate
/// interval).
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    panels(dashboard)
        .into_iter()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap().to_owned();
            panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |target| {
                    let expr = target["expr"]
                        .as_str()
                        .unwrap()
                        .replace("$__rate_interval", RATE_INTERVAL)
                        .replace("$zone", ".*")
                        .replace("$network", "primary")
                        .replace("$node", ".*");
                    (title.clone(), expr)
                })
        })
        .collect()
}

#[test]
fn every_panel_takes_its_data_source_from_the_variable() {
    let dashboard = dashboard();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    // A data source, a network, a zone and a node to choose.
    for name in ["datasource", "network", "zone", "node"] {
        assert!(
            variables.iter().any(|v| v["name"] == name),
            "no {name} variable"
        );
    }
    let datasource = variables
        .iter()
        .find(|v| v["name"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let uses_variable = |d: &Value| d["uid"] == "${datasource}" && d["type"] == "prometheus";
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        assert!(uses_variable(&variable["datasource"]), "{variable}");
    }
    let mut queries = 0;
    for panel in panels(&dashboard) {
        if panel["type"] == "row" {
            continue;
        }
        assert!(uses_variable(&panel["datasource"]), "{}", panel["title"]);
        for target in panel["targets"].as_array().unwrap() {
            assert!(uses_variable(&target["datasource"]), "{}", panel["title"]);
            assert!(
                !target["expr"].as_str().unwrap().trim().is_empty(),
                "{}",
                panel["title"]
            );
            queries += 1;
        }
    }
    assert!(queries >= 20, "{queries} queries");
    // The panels an operator looks for first are there.
    let titles: Vec<&str> = panels(&dashboard)
        .iter()
        .filter_map(|p| p["title"].as_str())
        .collect();
    for wanted in [
        "Zone-pair RTT (ms)",
        "Worst pairs",
        "Node scores",
        "Loss by zone pair",
        "Goodput by zone pair",
        "Agents up",
        "Extender calls per second",
        "Pair RTTs between zones (distribution)",
        "The node's worst links",
    ] {
        assert!(titles.contains(&wanted), "no panel {wanted}: {titles:?}");
    }
}

/// The label sets of the alerts named `name` that fire now.
async fn firing(prometheus: SocketAddr, name: &str) -> Vec<BTreeMap<String, String>> {
    let Ok(data) = prometheus_get(prometheus, "/api/v1/alerts").await else {
        return Vec::new();
    };
    data["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing" && a["labels"]["alertname"] == name)
        .map(|a| serde_json::from_value(a["labels"].clone()).unwrap())
        .collect()
}

/// Waits for alert `name` to fire with a label set that `wanted` accepts;
/// returns every firing label set.
async fn wait_for_alert(
    prometheus: SocketAddr,
    name: &str,
    limit: Duration,
    wanted: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Vec<BTreeMap<String, String>> {
    let alerts = netaware_testkit::wait_for(&format!("alert {name}"), limit, || async {
        let alerts = firing(prometheus, name).await;
        alerts.iter().any(&wanted).then_some(alerts)
    })
    .await;
    println!("{name} fires: {alerts:?}");
    alerts
}

const TIMING: AgentTiming = AgentTiming::FAST;

/// Prometheus's configuration: every second, the collector, the agents and
/// the extender, under the job names the dashboard and the rules use (the
/// names the ServiceMonitor and PodMonitors give).
fn prometheus_config(
    collector: String,
    agents: Vec<String>,
    scheduler: String,
    rules: &Path,
) -> String {
    let job = |name: &str, targets: Vec<String>| json!({"job_name": name, "static_configs": [{"targets": targets}]});
    json!({
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [rules],
        "scrape_configs": [
            job("netaware-collector", vec![collector]),
            job("netaware-agent", agents),
            job("netaware-scheduler", vec![scheduler]),
        ]
    })
    .to_string()
}

#[test]
fn a_real_prometheus_answers_every_panel_and_fires_every_alert() {
    if !root_or_skip("Prometheus on the lab") {
        return;
    }
    // Alone: labs and the timing this measures share two cores.
    let _one = netaware_testkit::one_lab_at_a_time();
    if !prometheus::available() {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    // Throughput tests on, quick ones, so that goodput panels have data.
    let flags: Vec<String> = [
        "--throughput-budget=1",
        "--throughput-duration=1s",
        "--throughput-omit=500ms",
        "--throughput-max-concurrent=2",
        // Rounds of blocks and faults every 2 s, so that a fault is named
        // within seconds.
        "--topology-interval=2s",
    ]
    .map(String::from)
    .to_vec();
    let mut system =
        LabSystem::start(Topology::named("default").unwrap(), exe, TIMING, &flags).unwrap();
    let lab = system.lab();
    let control = lab.control().spec.address;
    let access = lab.open_access("control").unwrap();
    // This process's end of the side door: Prometheus scrapes the extender
    // there.
    let outside = Ipv4Addr::from(u32::from(access) - 1);
    let workers: Vec<String> = lab.workers().map(|h| h.spec.name.clone()).collect();
    let agent_targets = lab
        .workers()
        .map(|h| {
            format!(
                "{}:{}",
                h.spec.address,
                netaware_testkit::AGENT_METRICS_PORT
            )
        })
        .collect();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let shutdown = CancellationToken::new();
    // The extender as in its pod, following the collector's scores.
    let extender_addr = runtime.block_on(async {
        let cache = ScoreCache::new(Duration::from_secs(5));
        tokio::spawn(cache.clone().follow(
            format!("http://{access}:{COLLECTOR_PORT}"),
            shutdown.clone(),
        ));
        let extender = Arc::new(Extender::new(
            cache,
            Arc::new(tokio::sync::RwLock::new(Placements::new())),
            None,
        ));
        netaware_testkit::serve_extender_on(
            SocketAddr::new(IpAddr::V4(outside), 0),
            extender,
            &shutdown,
        )
        .await
    });
    // kube-scheduler's calls for a two-worker job, twice a second.
    runtime.spawn({
        let shutdown = shutdown.clone();
        async move {
            let pod = json!({"metadata": {"name": "train-0", "namespace": "ml", "uid": "u0",
                "labels": {"netaware.io/group": "train", "netaware.io/group-size": "2"}}});
            let body = json!({"Pod": pod, "NodeNames": workers}).to_string();
            while !shutdown.is_cancelled() {
                netaware_testkit::post(extender_addr, "/filter", body.as_bytes()).await;
                netaware_testkit::post(extender_addr, "/prioritize", body.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });

    // Prometheus in the control host, as it would run in the cluster.
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("netaware-rules.yml");
    std::fs::write(&rules, rules_file(Some("3s"))).unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        prometheus_config(
            format!("{control}:9470"),
            agent_targets,
            extender_addr.to_string(),
            &rules,
        ),
    )
    .unwrap();
    let mut prometheus = lab.command("control", "prometheus").unwrap();
    prometheus
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=0.0.0.0:{PROMETHEUS_PORT}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null());
    lab.spawn(prometheus).unwrap();
    let prometheus = SocketAddr::new(IpAddr::V4(access), PROMETHEUS_PORT);

    runtime.block_on(async {
        // Every target up: Prometheus parses every endpoint's exposition.
        let targets =
            netaware_testkit::wait_for("every target up", Duration::from_secs(60), || async {
                let data = prometheus_get(prometheus, "/api/v1/targets").await.ok()?;
                let active = data["activeTargets"].as_array()?.clone();
                (active.len() == 11 && active.iter().all(|t| t["health"] == "up")).then_some(active)
            })
            .await;
        println!("{} targets up", targets.len());

        // Every panel's every query returns data.
        let queries = panel_queries(&dashboard());
        netaware_testkit::wait_for("data for every panel", Duration::from_secs(120), || {
            let queries = &queries;
            async move {
                let mut empty = Vec::new();
                for (title, expr) in queries {
                    match query(prometheus, expr).await {
                        Ok(series) if !series.is_empty() => {}
                        Ok(_) => empty.push(format!("{title}: {expr}: no data")),
                        Err(err) => empty.push(format!("{title}: {expr}: {err}")),
                    }
                }
                if !empty.is_empty() {
                    println!("waiting for {} queries: {}", empty.len(), empty.join("; "));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                empty.is_empty().then_some(())
            }
        })
        .await;
        println!("all {} panel queries return data", queries.len());
        // The zone variable's values.
        let zones = prometheus_get(
            prometheus,
            "/api/v1/label/zone/values?match%5B%5D=netaware_node_score",
        )
        .await
        .unwrap();
        assert_eq!(zones, json!(["zone-a", "zone-b", "zone-c"]));

        // a3 loses 5% each way: its links are lossy, not everyone's.
        let lossy = wait_for_alert(
            prometheus,
            "NetawareLossyLink",
            Duration::from_secs(60),
            |a| a["src"] == "a3" || a["dst"] == "a3",
        )
        .await;
        assert!(lossy.len() < 72 / 2, "{lossy:?}");
        // and a3 itself is degraded: lossy to both its zone-mates. They are
        // not (each has one clean zone-mate), nor is any host of zone-c.
        let degraded = wait_for_alert(
            prometheus,
            "NetawareNodeDegraded",
            Duration::from_secs(60),
            |a| a["node"] == "a3",
        )
        .await;
        assert!(
            degraded
                .iter()
                .all(|a| !["a1", "a2"].contains(&a["node"].as_str()) && a["zone"] != "zone-c"),
            "{degraded:?}"
        );
        // and it is a node fault of the primary network.
        wait_for_alert(
            prometheus,
            "NetawareNetworkFault",
            Duration::from_secs(60),
            |a| a["network"] == "primary" && a["kind"] == "node",
        )
        .await;

        // Zone c cut off: the alert names it, and clears once it heals.
        let mut faults = Faults::default();
        faults.cut_zones.insert("zone-c".into());
        system.lab().set_faults(faults);
        let cut = wait_for_alert(
            prometheus,
            "NetawareZoneCutOff",
            Duration::from_secs(60),
            |a| a["dst_zone"] == "zone-c",
        )
        .await;
        assert!(cut.iter().all(|a| a["dst_zone"] == "zone-c"), "{cut:?}");
        system.lab().set_faults(Faults::default());
        netaware_testkit::wait_for("zone-c healed", Duration::from_secs(90), || async {
            firing(prometheus, "NetawareZoneCutOff")
                .await
                .is_empty()
                .then_some(())
        })
        .await;

        // ICMP dropped in every host: netaware cannot measure, and says so.
        let hosts: Vec<String> = system
            .lab()
            .workers()
            .map(|h| h.spec.name.clone())
            .collect();
        for host in &hosts {
            system.drop_every_probe(host).unwrap();
        }
        wait_for_alert(
            prometheus,
            "NetawareCannotMeasure",
            Duration::from_secs(90),
            |a| !a.contains_key("zone"),
        )
        .await;
        for host in &hosts {
            system.open_firewall(host).unwrap();
        }

        // b3's agent killed: stale.
        tokio::task::block_in_place(|| system.stop_agent("b3")).unwrap();
        wait_for_alert(
            prometheus,
            "NetawareAgentStale",
            Duration::from_secs(60),
            |a| a["node"] == "b3",
        )
        .await;

        // The collector killed: down, and the extender's answers turn
        // neutral once its scores age out.
        tokio::task::block_in_place(|| system.stop_collector());
        wait_for_alert(
            prometheus,
            "NetawareCollectorDown",
            Duration::from_secs(30),
            |_| true,
        )
        .await;
        wait_for_alert(
            prometheus,
            "NetawareSchedulerNeutral",
            Duration::from_secs(60),
            |_| true,
        )
        .await;
        shutdown.cancel();
    });
}
