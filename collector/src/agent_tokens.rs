//! `--agent-tokens`: node identity without a PKI. Each agent presents its
//! pod's projected service-account token (audience [`AUDIENCE`], bound to
//! the pod and so to its node, short-lived, rotated by kubelet) as
//! `authorization: Bearer` on its session; the collector asks the API
//! server whether it is valid (a TokenReview) and takes the node from the
//! token's node claim ([`NODE_NAME_CLAIM`]), never from the hello.
//!
//! A hello is refused (PERMISSION_DENIED, before any state changes) when
//! it has no token, when the token is not valid for the audience, when it
//! is not the agents' service account's (any pod may ask for a token with
//! any audience: only the agents' account speaks for nodes), when it names
//! another node than the token's, or when one of its addresses is not one
//! of that Node's `status.addresses`. Addresses on named networks (rails)
//! are not on the Node, and are not checked here: under mutual TLS the
//! certificate names them ([`crate::identity`]).
//!
//! The checks are pure ([`node_of_review`], [`addresses_on_node`]); the two
//! API calls are kept for a while ([`KEPT_FOR`]), so that a fleet
//! reconnecting costs the API server one review per token and one GET per
//! Node. When the API cannot answer, the hello is refused and the agent
//! retries: the check fails closed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::core::v1::Node;
use netaware_proto::v1::Hello;
use tokio::sync::Mutex;

/// The audience an agent's token must be for.
pub const AUDIENCE: &str = "netaware";
/// The claim of a pod-bound token that names the pod's node.
pub const NODE_NAME_CLAIM: &str = "authentication.kubernetes.io/node-name";
/// The agents' service account, as deploy/ names it.
pub const DEFAULT_AGENT_ACCOUNT: &str = "system:serviceaccount:netaware:netaware-agent";
/// How long a review and a Node's addresses are trusted before they are
/// asked again.
pub const KEPT_FOR: Duration = Duration::from_secs(300);
/// Most reviews and Nodes kept; past it, the expired ones are let go, and
/// when none has expired, all of them.
pub const MAX_KEPT: usize = 20_000;
/// The longest token taken (bound tokens are about a kilobyte).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a hello's token was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenRefused {
    /// The session carried no `authorization: Bearer` token.
    #[error(
        "no service-account token: an agent sends its pod's token (audience {AUDIENCE}) as `authorization: Bearer`"
    )]
    NoToken,
    /// The token is longer than any bound token.
    #[error("a token of {0} bytes, more than the {MAX_TOKEN_BYTES} taken")]
    TooLong(usize),
    /// The API server does not accept the token.
    #[error("the API server does not accept the token: {0}")]
    NotAuthenticated(String),
    /// The token is not for [`AUDIENCE`].
    #[error("the token is not for audience {AUDIENCE}")]
    WrongAudience,
    /// The token is another account's than the agents'.
    #[error("the token is {user:?}'s, not the agents' service account {expected:?}")]
    OtherAccount {
        /// Whose it is.
        user: String,
        /// The agents' account.
        expected: String,
    },
    /// The token names no node: not a pod's bound token.
    #[error("the token names no node ({NODE_NAME_CLAIM}): not a pod's bound token")]
    NoNode,
    /// The token is another node's than the hello says.
    #[error("the token is node {token:?}'s; the hello says {hello:?}")]
    OtherNode {
        /// The token's node.
        token: String,
        /// The hello's node.
        hello: String,
    },
    /// An address of the hello is not one of the Node's.
    #[error("address {address} is not one of Node {node}'s addresses ({known})")]
    NotNodeAddress {
        /// The node.
        node: String,
        /// The address the hello gave.
        address: String,
        /// The Node's addresses.
        known: String,
    },
    /// The API server could not be asked.
    #[error("cannot ask the API server: {0}")]
    Api(#[source] kube::Error),
}

/// The node a token review's `status` says the token speaks for, when it
/// is valid for [`AUDIENCE`] and the `account`'s.
pub fn node_of_review(status: &TokenReviewStatus, account: &str) -> Result<String, TokenRefused> {
    if status.authenticated != Some(true) {
        let why = status
            .error
            .clone()
            .unwrap_or_else(|| "not authenticated".into());
        return Err(TokenRefused::NotAuthenticated(why));
    }
    // An API server that checked the audience says which it matched.
    if !status
        .audiences
        .as_ref()
        .is_some_and(|audiences| audiences.iter().any(|a| a == AUDIENCE))
    {
        return Err(TokenRefused::WrongAudience);
    }
    let user = status.user.clone().unwrap_or_default();
    let username = user.username.unwrap_or_default();
    if username != account {
        return Err(TokenRefused::OtherAccount {
            user: username,
            expected: account.to_owned(),
        });
    }
    user.extra
        .unwrap_or_default()
        .remove(NODE_NAME_CLAIM)
        .and_then(|names| names.into_iter().next())
        .filter(|name| !name.is_empty())
        .ok_or(TokenRefused::NoNode)
}

/// Whether every address of `hello` is one of `known`, the addresses of
/// its Node (compared as IP addresses, so that spellings do not matter).
pub fn addresses_on_node(hello: &Hello, known: &[String]) -> Result<(), TokenRefused> {
    let parsed: Vec<std::net::IpAddr> = known.iter().filter_map(|a| a.parse().ok()).collect();
    for address in &hello.addresses {
        let on_node = address
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| parsed.contains(&ip));
        if !on_node {
            return Err(TokenRefused::NotNodeAddress {
                node: hello.node.clone(),
                address: address.clone(),
                known: known.join(", "),
            });
        }
    }
    Ok(())
}

/// The `authorization: Bearer` token of a request's metadata, if any.
pub fn bearer(metadata: &tonic::metadata::MetadataMap) -> Option<String> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

/// Answers kept for a while, bounded.
#[derive(Debug)]
struct Kept<T> {
    entries: HashMap<String, (T, Instant)>,
}

impl<T: Clone> Kept<T> {
    fn get(&self, key: &str) -> Option<T> {
        self.entries
            .get(key)
            .filter(|(_, at)| at.elapsed() < KEPT_FOR)
            .map(|(value, _)| value.clone())
    }

    fn keep(&mut self, key: String, value: T) {
        if self.entries.len() >= MAX_KEPT {
            self.entries.retain(|_, (_, at)| at.elapsed() < KEPT_FOR);
            if self.entries.len() >= MAX_KEPT {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (value, Instant::now()));
    }
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }
}

/// The Kubernetes API, asked for each agent's token and Node.
pub struct AgentTokens {
    client: kube::Client,
    account: String,
    reviews: Mutex<Kept<String>>,
    nodes: Mutex<Kept<Vec<String>>>,
}

impl std::fmt::Debug for AgentTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AgentTokens(the Kubernetes API, account {})",
            self.account
        )
    }
}

impl AgentTokens {
    /// Asks the API server behind `client`; tokens must be `account`'s.
    pub fn new(client: kube::Client, account: &str) -> Self {
        Self {
            client,
            account: account.to_owned(),
            reviews: Mutex::default(),
            nodes: Mutex::default(),
        }
    }

    /// Checks that `token` speaks for `hello`'s node and its addresses.
    pub async fn check(&self, token: Option<&str>, hello: &Hello) -> Result<(), TokenRefused> {
        let token = token.ok_or(TokenRefused::NoToken)?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenRefused::TooLong(token.len()));
        }
        let node = self.node_of(token).await?;
        if node != hello.node {
            return Err(TokenRefused::OtherNode {
                token: node,
                hello: hello.node.clone(),
            });
        }
        let known = self.addresses_of(&node).await?;
        addresses_on_node(hello, &known)
    }

    async fn node_of(&self, token: &str) -> Result<String, TokenRefused> {
        if let Some(node) = self.reviews.lock().await.get(token) {
            return Ok(node);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: Some(vec![AUDIENCE.to_owned()]),
            },
            ..TokenReview::default()
        };
        let reviews: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let answer = reviews
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(TokenRefused::Api)?;
        let node = node_of_review(&answer.status.unwrap_or_default(), &self.account)?;
        self.reviews
            .lock()
            .await
            .keep(token.to_owned(), node.clone());
        Ok(node)
    }

    async fn addresses_of(&self, node: &str) -> Result<Vec<String>, TokenRefused> {
        if let Some(addresses) = self.nodes.lock().await.get(node) {
            return Ok(addresses);
        }
        let nodes: kube::Api<Node> = kube::Api::all(self.client.clone());
        let object = nodes.get(node).await.map_err(TokenRefused::Api)?;
        let addresses: Vec<String> = object
            .status
            .and_then(|status| status.addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.address)
            .collect();
        self.nodes
            .lock()
            .await
            .keep(node.to_owned(), addresses.clone());
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;
    use std::collections::BTreeMap;

    fn status(
        authenticated: bool,
        audience: &str,
        user: &str,
        node: Option<&str>,
    ) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(authenticated),
            audiences: Some(vec![audience.to_owned()]),
            error: None,
            user: Some(UserInfo {
                username: Some(user.to_owned()),
                extra: node
                    .map(|n| BTreeMap::from([(NODE_NAME_CLAIM.to_owned(), vec![n.to_owned()])])),
                ..UserInfo::default()
            }),
        }
    }

    #[test]
    fn only_a_valid_bound_token_of_the_agents_account_names_a_node() {
        let agent = DEFAULT_AGENT_ACCOUNT;
        assert_eq!(
            node_of_review(&status(true, AUDIENCE, agent, Some("gpu-1")), agent).unwrap(),
            "gpu-1"
        );
        let refused = |status: TokenReviewStatus| node_of_review(&status, agent).unwrap_err();
        assert!(matches!(
            refused(status(false, AUDIENCE, agent, Some("gpu-1"))),
            TokenRefused::NotAuthenticated(_)
        ));
        assert!(matches!(
            refused(status(true, "kubernetes", agent, Some("gpu-1"))),
            TokenRefused::WrongAudience
        ));
        // Any pod may ask for a token for this audience: only the agents'
        // account speaks for nodes.
        assert!(matches!(
            refused(status(
                true,
                AUDIENCE,
                "system:serviceaccount:default:web",
                Some("gpu-1")
            )),
            TokenRefused::OtherAccount { .. }
        ));
        assert!(matches!(
            refused(status(true, AUDIENCE, agent, None)),
            TokenRefused::NoNode
        ));
    }

    #[test]
    fn every_address_of_a_hello_must_be_its_node_s() {
        let hello = |addresses: &[&str]| Hello {
            node: "gpu-1".into(),
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
            ..Hello::default()
        };
        let known = ["10.0.0.7".to_owned(), "fd00::7".to_owned()];
        assert!(addresses_on_node(&hello(&["10.0.0.7", "fd00:0::7"]), &known).is_ok());
        let message = addresses_on_node(&hello(&["10.0.0.7", "10.0.0.8"]), &known)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("10.0.0.8") && message.contains("gpu-1"),
            "{message}"
        );
        assert!(addresses_on_node(&hello(&["not an address"]), &known).is_err());
    }

    #[test]
    fn the_token_is_read_from_a_bearer_header_only() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert_eq!(bearer(&metadata), None);
        metadata.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer(&metadata), None);
        metadata.insert("authorization", "Bearer abc.def".parse().unwrap());
        assert_eq!(bearer(&metadata).as_deref(), Some("abc.def"));
    }
}
