//! `netaware certs`: a private CA and the certificates that deploy/tls
//! needs: the collector's (its Service names), the extender's (its Service
//! names and 127.0.0.1, where kube-scheduler calls it) and one per node
//! (the node name, which the collector holds an agent's hello to, and the
//! node's addresses, which Prometheus dials).
//!
//! Run again with more nodes, it reuses the CA in the directory, so that
//! certificates issued before stay valid. For large fleets, issue the same
//! names from your own PKI instead (docs/install.md, "TLS on a cluster").

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serde::Serialize;

/// The flags of `netaware certs`.
#[derive(Debug, clap::Args)]
pub struct CertsOptions {
    /// Directory to write into (created if missing; a CA in it is reused).
    #[arg(long)]
    pub out: PathBuf,
    /// A node: NAME or NAME=IP[,IP...] (repeat).
    #[arg(long = "node", value_name = "NAME[=IP,...]")]
    pub nodes: Vec<String>,
    /// The JSON of `kubectl get nodes -o json`: every node, with its
    /// InternalIP and ExternalIP addresses.
    #[arg(long = "nodes-from", value_name = "FILE")]
    pub nodes_from: Option<PathBuf>,
    /// Namespace netaware runs in (names in the Service certificates).
    #[arg(long, default_value = "netaware")]
    pub namespace: String,
    /// Validity of the certificates, in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// How to print the files written.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// One certificate to issue: where, for which names, for what use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertSpec {
    /// Subdirectory of the output (`collector`, `scheduler`, `nodes/NAME`).
    pub dir: String,
    /// DNS names and IP addresses it is valid for.
    pub names: Vec<String>,
    /// Whether it serves (TLS server) as well as connects (TLS client).
    pub serves: bool,
}

/// A node named in the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name (the certificate's DNS name).
    pub name: String,
    /// Its addresses (the certificate's IP names).
    pub addresses: Vec<IpAddr>,
}

/// Parses `NAME` or `NAME=IP,IP`.
pub fn parse_node(text: &str) -> anyhow::Result<NodeSpec> {
    let (name, addresses) = text.split_once('=').unwrap_or((text, ""));
    let addresses = addresses
        .split(',')
        .filter(|a| !a.is_empty())
        .map(|a| {
            a.parse()
                .with_context(|| format!("{a:?} in --node {text:?} is not an IP address"))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(NodeSpec {
        name: name.to_owned(),
        addresses,
    })
}

/// The nodes of `kubectl get nodes -o json`.
pub fn nodes_from_kubectl(json: &str) -> anyhow::Result<Vec<NodeSpec>> {
    let list: serde_json::Value = serde_json::from_str(json).context("not JSON")?;
    let items = list["items"]
        .as_array()
        .context("no \"items\": not the output of `kubectl get nodes -o json`")?;
    items
        .iter()
        .map(|node| {
            let name = node["metadata"]["name"]
                .as_str()
                .context("a node without metadata.name")?;
            let addresses = node["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["type"] == "InternalIP" || a["type"] == "ExternalIP")
                .filter_map(|a| a["address"].as_str()?.parse().ok())
                .collect();
            Ok(NodeSpec {
                name: name.to_owned(),
                addresses,
            })
        })
        .collect()
}

/// What to issue for `nodes` in `namespace`. Node names must be DNS names:
/// the collector matches an agent's hello against its certificate's DNS
/// names, and a name that is not one could never match.
pub fn plan(nodes: &[NodeSpec], namespace: &str) -> anyhow::Result<Vec<CertSpec>> {
    let service = |name: &str| {
        vec![
            name.to_owned(),
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]
    };
    let mut scheduler = service("netaware-scheduler");
    scheduler.extend(["localhost".to_owned(), "127.0.0.1".to_owned()]);
    let mut specs = vec![
        CertSpec {
            dir: "collector".into(),
            names: service("netaware-collector"),
            serves: true,
        },
        CertSpec {
            dir: "scheduler".into(),
            names: scheduler,
            serves: true,
        },
    ];
    let mut seen = std::collections::BTreeSet::new();
    for node in nodes {
        if rustls_pki_types::DnsName::try_from(node.name.as_str()).is_err()
            || node.name.parse::<IpAddr>().is_ok()
            || node.name.contains('/')
        {
            bail!("node name {:?} is not a DNS name", node.name);
        }
        if !seen.insert(node.name.clone()) {
            bail!("node {:?} given twice", node.name);
        }
        let mut names = vec![node.name.clone()];
        names.extend(node.addresses.iter().map(IpAddr::to_string));
        specs.push(CertSpec {
            dir: format!("nodes/{}", node.name),
            names,
            serves: true,
        });
    }
    Ok(specs)
}

/// What `netaware certs --json` prints.
#[derive(Debug, Serialize)]
pub struct CertsReport {
    /// The CA certificate.
    pub ca: PathBuf,
    /// Whether an existing CA in the directory was used.
    pub ca_reused: bool,
    /// Every certificate written.
    pub issued: Vec<Issued>,
}

/// One certificate written.
#[derive(Debug, Serialize)]
pub struct Issued {
    /// Where its certificate and key are.
    pub dir: PathBuf,
    /// The names it carries.
    pub names: Vec<String>,
}

fn write(path: &Path, text: &str, secret: bool) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // An hour of slack for clocks that run behind.
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(i64::from(days));
}

/// The CA in `out` (ca.crt, ca.key), made when missing.
fn ca(out: &Path, days: u32) -> anyhow::Result<(Issuer<'static, KeyPair>, String, bool)> {
    let (cert_path, key_path) = (out.join("ca.crt"), out.join("ca.key"));
    if cert_path.exists() && key_path.exists() {
        let cert = std::fs::read_to_string(&cert_path)?;
        let key = KeyPair::from_pem(&std::fs::read_to_string(&key_path)?)
            .with_context(|| format!("{}: not a private key", key_path.display()))?;
        let issuer = Issuer::from_ca_cert_pem(&cert, key)
            .with_context(|| format!("{}: not a CA certificate", cert_path.display()))?;
        return Ok((issuer, cert, true));
    }
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "netaware CA");
    validity(&mut params, days.saturating_mul(2));
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?.pem();
    write(&cert_path, &cert, false)?;
    write(&key_path, &key.serialize_pem(), true)?;
    Ok((Issuer::new(params, key), cert, false))
}

/// Writes the CA and every certificate of `plan(...)` into `options.out`.
pub fn run(options: &CertsOptions) -> anyhow::Result<CertsReport> {
    let mut nodes = options
        .nodes
        .iter()
        .map(|n| parse_node(n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(path) = &options.nodes_from {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        nodes.extend(nodes_from_kubectl(&text).with_context(|| path.display().to_string())?);
    }
    let specs = plan(&nodes, &options.namespace)?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("creating {}", options.out.display()))?;
    let (issuer, ca_pem, ca_reused) = ca(&options.out, options.days)?;
    let mut issued = Vec::new();
    for spec in specs {
        let dir = options.out.join(&spec.dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut params = CertificateParams::new(spec.names.clone())?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, spec.names[0].as_str());
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if spec.serves {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        validity(&mut params, options.days);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        write(&dir.join("ca.crt"), &ca_pem, false)?;
        write(&dir.join("tls.crt"), &cert.pem(), false)?;
        write(&dir.join("tls.key"), &key.serialize_pem(), true)?;
        issued.push(Issued {
            dir,
            names: spec.names,
        });
    }
    Ok(CertsReport {
        ca: options.out.join("ca.crt"),
        ca_reused,
        issued,
    })
}

/// Makes the certificates and prints what was written.
pub fn print(options: &CertsOptions) -> anyhow::Result<()> {
    let report = run(options)?;
    options
        .output
        .print(&report, |_| render(&report, &options.namespace))
}

/// What to do with the files, for people.
pub fn render(report: &CertsReport, namespace: &str) -> String {
    let mut text = format!(
        "CA: {} ({})\n",
        report.ca.display(),
        if report.ca_reused {
            "reused"
        } else {
            "new; keep ca.key safe"
        }
    );
    for issued in &report.issued {
        text.push_str(&format!(
            "  {}  {}\n",
            issued.dir.display(),
            issued.names.join(", ")
        ));
    }
    let dir = |name: &str| {
        report
            .issued
            .iter()
            .find(|i| i.dir.ends_with(name))
            .map_or_else(String::new, |i| i.dir.display().to_string())
    };
    text.push_str(&format!(
        "\nNext (docs/install.md, \"TLS on a cluster\"):\n  \
         kubectl -n {namespace} create secret generic netaware-collector-tls --from-file={}\n  \
         kubectl -n {namespace} create secret generic netaware-scheduler-tls --from-file={}\n  \
         kubectl -n {namespace} create secret generic netaware-ca --from-file={}\n  \
         copy nodes/NODE/* to /etc/netaware/pki/ on each node (mode 0600 for tls.key)\n  \
         kubectl apply -k deploy/tls\n",
        dir("collector"),
        dir("scheduler"),
        report.ca.display(),
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_parse_with_and_without_addresses() {
        assert_eq!(
            parse_node("gpu-1=10.0.0.1,fd00::1").unwrap(),
            NodeSpec {
                name: "gpu-1".into(),
                addresses: vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()],
            }
        );
        assert!(parse_node("gpu-1").unwrap().addresses.is_empty());
        assert!(parse_node("gpu-1=ten").is_err());
    }

    #[test]
    fn the_plan_names_services_the_extender_on_loopback_and_each_node() {
        let nodes = [parse_node("gpu-1=10.0.0.1").unwrap()];
        let specs = plan(&nodes, "ml").unwrap();
        assert_eq!(specs.len(), 3);
        assert!(
            specs[0]
                .names
                .contains(&"netaware-collector.ml.svc".to_owned())
        );
        assert!(specs[1].names.contains(&"127.0.0.1".to_owned()));
        assert_eq!(specs[2].dir, "nodes/gpu-1");
        assert_eq!(specs[2].names, ["gpu-1", "10.0.0.1"]);
    }

    #[test]
    fn bad_or_repeated_node_names_are_refused() {
        for name in ["", "a b", "10.0.0.1", "../etc", "a/b"] {
            let nodes = [NodeSpec {
                name: name.into(),
                addresses: vec![],
            }];
            assert!(plan(&nodes, "netaware").is_err(), "{name:?}");
        }
        let twice = [parse_node("a").unwrap(), parse_node("a").unwrap()];
        assert!(plan(&twice, "netaware").is_err());
    }

    #[test]
    fn kubectl_node_lists_give_names_and_addresses() {
        let json = r#"{"items": [{"metadata": {"name": "gpu-1"}, "status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "Hostname", "address": "gpu-1"}]}}]}"#;
        let nodes = nodes_from_kubectl(json).unwrap();
        assert_eq!(nodes, [parse_node("gpu-1=10.0.0.1").unwrap()]);
        assert!(nodes_from_kubectl("{}").is_err());
    }
}
