//! A parameter server on worker 0: every other worker sends its whole
//! gradient to it and reads the whole update back. Worker 0 reads all the
//! gradients at once, then sends all the updates at once, so its links
//! carry k-1 times a worker's bytes: the pattern's known bottleneck.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{WorkloadOptions, accept, connect};

/// A worker's side of the parameter server pattern.
#[derive(Debug)]
pub enum ParameterServer {
    /// Worker 0.
    Server {
        /// A connection from every other worker.
        workers: Vec<TcpStream>,
        /// A buffer for each one's gradient.
        gradients: Vec<Vec<u8>>,
        /// The update sent back.
        update: Vec<u8>,
    },
    /// Every other worker: its connection to worker 0.
    Worker {
        /// The connection to worker 0.
        server: TcpStream,
        /// The gradient sent and the update received.
        buffer: Vec<u8>,
    },
}

impl ParameterServer {
    /// Worker 0 takes a connection from every other; the others connect.
    pub async fn connect(
        options: &WorkloadOptions,
        listener: TcpListener,
        gradient_bytes: u64,
    ) -> anyhow::Result<Self> {
        let buffer = vec![0x5a; usize::try_from(gradient_bytes)?];
        let k = options.workers.len();
        Ok(if options.rank == 0 {
            let workers = accept(&listener, k - 1, options.connect_timeout).await?;
            ParameterServer::Server {
                gradients: vec![buffer.clone(); workers.len()],
                workers,
                update: buffer,
            }
        } else {
            let server = connect(options.workers[0], options.connect_timeout).await?;
            ParameterServer::Worker { server, buffer }
        })
    }

    /// One iteration: gradients in, updates out.
    pub async fn exchange(&mut self) -> std::io::Result<()> {
        match self {
            ParameterServer::Server {
                workers,
                gradients,
                update,
            } => {
                let reads =
                    workers.iter_mut().zip(gradients.iter_mut()).map(
                        |(stream, gradient)| async move {
                            stream.read_exact(gradient).await.map(|_| ())
                        },
                    );
                for read in futures::future::join_all(reads).await {
                    read?;
                }
                let update: &[u8] = update;
                let writes = workers
                    .iter_mut()
                    .map(|stream| async move { stream.write_all(update).await });
                for write in futures::future::join_all(writes).await {
                    write?;
                }
                Ok(())
            }
            ParameterServer::Worker { server, buffer } => {
                server.write_all(buffer).await?;
                server.read_exact(buffer).await.map(|_| ())
            }
        }
    }
}
