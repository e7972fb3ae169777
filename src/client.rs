//! A connection to a collector's Scores service, as the CLI uses it.

use netaware_core::network::Network;
use netaware_proto::convert;
use netaware_proto::v1 as pb;
use netaware_proto::v1::scores_client::ScoresClient;
use tonic::transport::Channel;

/// Largest answer the CLI accepts: the collector pages the matrix, so no
/// answer is over 4 MiB.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// A Scores client (a clone shares its connection), asking about one
/// network (the primary unless [`ScoresConnection::on`] says otherwise).
#[derive(Clone, Debug)]
pub struct ScoresConnection {
    client: ScoresClient<Channel>,
    network: Network,
}

impl ScoresConnection {
    /// Connects to the collector at `url` (such as `http://127.0.0.1:7470`).
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with(url, None).await
    }

    /// Connects to the collector at `url`, over TLS when `tls` is given.
    pub async fn connect_with(
        url: &str,
        tls: Option<&netaware_runtime::tls::Tls>,
    ) -> anyhow::Result<Self> {
        let channel = netaware_runtime::tls::endpoint(url, tls)?
            .connect()
            .await
            .map_err(|err| anyhow::anyhow!("cannot reach the collector at {url}: {err}"))?;
        Ok(Self {
            client: ScoresClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES),
            network: Network::primary(),
        })
    }

    /// The same connection, asking about `network`: its zones, estimates
    /// and rankings.
    pub fn on(self, network: &Network) -> Self {
        Self {
            network: network.clone(),
            ..self
        }
    }

    /// The whole matrix, every page put together.
    pub async fn matrix(&mut self) -> anyhow::Result<pb::Matrix> {
        self.matrix_of(&pb::MatrixRequest::default()).await
    }

    /// The part of the matrix `request` asks for (zone or node), every
    /// page put together.
    pub async fn matrix_of(&mut self, request: &pb::MatrixRequest) -> anyhow::Result<pb::Matrix> {
        let mut whole: Option<pb::Matrix> = None;
        self.matrix_pages(request, |page| match &mut whole {
            None => whole = Some(page),
            Some(whole) => whole.pairs.extend(page.pairs),
        })
        .await?;
        Ok(whole.unwrap_or_default())
    }

    /// The pages of the part of the matrix `request` asks for, each handed
    /// to `page` as it comes: a large cluster's matrix need not be held
    /// whole. Nodes come with the first page only.
    pub async fn matrix_pages(
        &mut self,
        request: &pb::MatrixRequest,
        mut page: impl FnMut(pb::Matrix),
    ) -> anyhow::Result<()> {
        let mut request = request.clone();
        loop {
            let answer = self.client.get_matrix(request.clone()).await?.into_inner();
            let next = answer.next_page_token.clone();
            page(answer);
            if next.is_empty() {
                return Ok(());
            }
            request.page_token = next;
        }
    }

    /// The zone summary.
    pub async fn zones(&mut self) -> anyhow::Result<pb::ZoneSummary> {
        Ok(self
            .client
            .get_zones(pb::ZonesRequest {
                network: convert::network_to_wire(&self.network),
            })
            .await?
            .into_inner())
    }

    /// The measured topology of the connection's network.
    pub async fn topology(&mut self) -> anyhow::Result<pb::Topology> {
        Ok(self
            .client
            .get_topology(pb::TopologyRequest {
                network: convert::network_to_wire(&self.network),
            })
            .await?
            .into_inner())
    }

    /// The open faults of `network`, or of every network.
    pub async fn faults(
        &mut self,
        network: Option<&Network>,
    ) -> anyhow::Result<pb::FaultsResponse> {
        Ok(self
            .client
            .get_faults(pb::FaultsRequest {
                network: network.map(convert::network_to_wire).unwrap_or_default(),
            })
            .await?
            .into_inner())
    }

    /// The RTT of `src` to `dst`, or to every other node.
    pub async fn estimate(
        &mut self,
        src: &str,
        dst: Option<&str>,
    ) -> anyhow::Result<pb::EstimateResponse> {
        let request = pb::EstimateRequest {
            src: src.to_owned(),
            dst: dst.unwrap_or_default().to_owned(),
            network: convert::network_to_wire(&self.network),
        };
        Ok(self.client.estimate(request).await?.into_inner())
    }

    /// A ranking for a job of `size` workers with workers already on `placed`.
    pub async fn rank(
        &mut self,
        size: usize,
        placed: &[String],
    ) -> anyhow::Result<pb::RankResponse> {
        let network = self.network.clone();
        self.rank_by(&[network], size, placed).await
    }

    /// [`ScoresConnection::rank`] by the worst of `networks`, pair by pair
    /// (by that network alone when it is one).
    pub async fn rank_by(
        &mut self,
        networks: &[Network],
        size: usize,
        placed: &[String],
    ) -> anyhow::Result<pb::RankResponse> {
        let request = pb::RankRequest {
            size: u32::try_from(size)
                .map_err(|_| anyhow::anyhow!("job size {size} is too large"))?,
            placed: placed.to_vec(),
            candidates: Vec::new(),
            strict_zone: false,
            network: convert::networks_to_wire(networks),
        };
        Ok(self.client.rank(request).await?.into_inner())
    }
}
