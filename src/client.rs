//! A connection to a collector's Scores service, as the CLI uses it.

use netaware_proto::v1 as pb;
use netaware_proto::v1::scores_client::ScoresClient;
use tonic::transport::Channel;

/// Largest answer the CLI accepts (a large cluster's matrix).
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// A Scores client.
pub struct ScoresConnection {
    client: ScoresClient<Channel>,
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
        })
    }

    /// The whole matrix.
    pub async fn matrix(&mut self) -> anyhow::Result<pb::Matrix> {
        Ok(self
            .client
            .get_matrix(pb::MatrixRequest {})
            .await?
            .into_inner())
    }

    /// The zone summary.
    pub async fn zones(&mut self) -> anyhow::Result<pb::ZoneSummary> {
        Ok(self
            .client
            .get_zones(pb::ZonesRequest {})
            .await?
            .into_inner())
    }

    /// A ranking for a job of `size` workers with workers already on `placed`.
    pub async fn rank(
        &mut self,
        size: usize,
        placed: &[String],
    ) -> anyhow::Result<pb::RankResponse> {
        let request = pb::RankRequest {
            size: u32::try_from(size)
                .map_err(|_| anyhow::anyhow!("job size {size} is too large"))?,
            placed: placed.to_vec(),
            candidates: Vec::new(),
            strict_zone: false,
        };
        Ok(self.client.rank(request).await?.into_inner())
    }
}
