//! Ring all-reduce: worker r sends to r+1 and receives from r-1 (mod k).
//! Each iteration is 2(k-1) steps (k-1 of reduce-scatter, k-1 of
//! all-gather); in each, a 1/k chunk of the gradient goes out while one
//! comes in, so a step lasts as long as the slowest link of the ring.

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::{WorkloadOptions, accept, connect};

/// A worker's place in the ring.
#[derive(Debug)]
pub struct Ring {
    to_next: Option<OwnedWriteHalf>,
    from_previous: Option<OwnedReadHalf>,
    steps: usize,
    outgoing: Vec<u8>,
    incoming: Vec<u8>,
}

impl Ring {
    /// Connects to the next worker and takes the previous one's connection.
    pub async fn connect(
        options: &WorkloadOptions,
        listener: TcpListener,
        gradient_bytes: u64,
    ) -> anyhow::Result<Self> {
        let k = options.workers.len();
        let chunk =
            usize::try_from(gradient_bytes.div_ceil(k as u64)).context("gradient too large")?;
        if k == 1 {
            return Ok(Self {
                to_next: None,
                from_previous: None,
                steps: 0,
                outgoing: Vec::new(),
                incoming: Vec::new(),
            });
        }
        let next = options.workers[(options.rank + 1) % k];
        let (mut inbound, outbound) = tokio::try_join!(
            accept(&listener, 1, options.connect_timeout),
            connect(next, options.connect_timeout),
        )?;
        let (from_previous, _) = inbound.remove(0).into_split();
        let (_, to_next) = outbound.into_split();
        Ok(Self {
            to_next: Some(to_next),
            from_previous: Some(from_previous),
            steps: 2 * (k - 1),
            outgoing: vec![0x5a; chunk],
            incoming: vec![0; chunk],
        })
    }

    /// One all-reduce.
    pub async fn exchange(&mut self) -> std::io::Result<()> {
        let (Some(to_next), Some(from_previous)) = (&mut self.to_next, &mut self.from_previous)
        else {
            return Ok(());
        };
        for _ in 0..self.steps {
            let (sent, received) = tokio::join!(
                to_next.write_all(&self.outgoing),
                from_previous.read_exact(&mut self.incoming),
            );
            sent?;
            received?;
        }
        Ok(())
    }
}
