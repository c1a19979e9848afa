//! Bridges between synchronous `std::io` code (the archive writer and reader, which run in
//! `spawn_blocking`) and the asynchronous store.
//!
//! Both bridges move chunks through a bounded channel of [`CHANNEL_CAPACITY`] chunks, so the
//! bytes in the hand-over are bounded by `CHANNEL_CAPACITY × CHUNK_SIZE` for the writer and by
//! `CHANNEL_CAPACITY` network chunks for the reader. Their `Write`/`Read` methods block the
//! calling thread; they must not be called on an async runtime thread (tokio panics then).

use std::io;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;
use crate::location::{ByteStream, Location};
use crate::stream::ArtifactWriter;

/// Chunks in flight between the synchronous side and the uploading or downloading task.
pub const CHANNEL_CAPACITY: usize = 4;
/// Bytes the blocking writer gathers before handing them over.
pub const CHUNK_SIZE: usize = 256 * 1024;

enum Message {
    Data(Bytes),
    Finish,
}

/// A `std::io::Write` whose bytes are uploaded by a task on the runtime. Obtain one with
/// [`Location::blocking_writer`] (in async context), move it into `spawn_blocking`, write, then
/// call [`finish`](Self::finish). Dropping it without `finish` aborts the upload: nothing is
/// stored.
#[derive(Debug)]
pub struct BlockingWriter {
    key: String,
    buffer: BytesMut,
    sender: Option<mpsc::Sender<Message>>,
    result: Option<oneshot::Receiver<Result<u64, StoreError>>>,
    /// Why the upload failed, once a hand-over found it failed; every later call reports it.
    failure: Option<StoreError>,
}

impl Location {
    /// A blocking `std::io::Write` bridge over [`Location::writer`]. Must be called inside a
    /// tokio runtime (the uploading task is spawned on it).
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`], [`StoreError::NoRuntime`].
    pub fn blocking_writer(&self, key: &str) -> Result<BlockingWriter, StoreError> {
        let handle = Handle::try_current().map_err(|_| StoreError::NoRuntime {
            operation: "blocking_writer",
        })?;
        let writer = self.writer(key)?;
        let (sender, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        let (done, result) = oneshot::channel();
        handle.spawn(pump_upload(writer, receiver, done));
        Ok(BlockingWriter {
            key: key.to_owned(),
            buffer: BytesMut::with_capacity(CHUNK_SIZE),
            sender: Some(sender),
            result: Some(result),
            failure: None,
        })
    }

    /// Opens an object for a blocking `std::io::Read`. The object is opened here (so a missing
    /// object is reported before any read); its bytes are fetched by a task on the runtime.
    ///
    /// # Errors
    /// [`StoreError::Storage`] (see [`StoreError::is_not_found`]), [`StoreError::InvalidKey`].
    pub async fn blocking_reader(&self, key: &str) -> Result<BlockingReader, StoreError> {
        let stream = self.get_stream(key).await?;
        let (sender, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        tokio::spawn(pump_download(stream, sender));
        Ok(BlockingReader {
            receiver,
            current: Bytes::new(),
            done: false,
            failure: None,
        })
    }
}

async fn pump_upload(
    mut writer: ArtifactWriter,
    mut receiver: mpsc::Receiver<Message>,
    done: oneshot::Sender<Result<u64, StoreError>>,
) {
    let result = loop {
        match receiver.recv().await {
            Some(Message::Data(bytes)) => {
                if let Err(e) = writer.write(&bytes).await {
                    break Err(e);
                }
            }
            Some(Message::Finish) => break writer.finish().await,
            None => {
                let key = writer.key().to_owned();
                writer.abort().await;
                break Err(StoreError::Abandoned { key });
            }
        }
    };
    // Closing the channel first makes a blocked `write` return at once.
    drop(receiver);
    // The writer may be gone already (dropped); then nobody waits for the result.
    let _ = done.send(result);
}

async fn pump_download(mut stream: ByteStream, sender: mpsc::Sender<Result<Bytes, StoreError>>) {
    while let Some(item) = stream.next().await {
        let failed = item.is_err();
        if sender.send(item).await.is_err() || failed {
            // The reader was dropped, or the error is delivered: stop fetching.
            return;
        }
    }
}

impl BlockingWriter {
    /// The key being written.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Sends the remaining bytes, completes the upload and waits for it. Returns the size.
    ///
    /// # Errors
    /// The upload's [`StoreError`]; nothing is stored then.
    pub fn finish(mut self) -> Result<u64, StoreError> {
        let handed = self.hand_over();
        if let Some(failure) = self.failure.take() {
            // The upload's own error, fetched by this or an earlier hand-over.
            return Err(failure);
        }
        if handed.is_ok()
            && let Some(sender) = self.sender.take()
        {
            // A send error means the task stopped; its result says why.
            let _ = sender.blocking_send(Message::Finish);
        }
        self.sender = None;
        self.wait_result()
    }

    fn wait_result(&mut self) -> Result<u64, StoreError> {
        match self.result.take() {
            Some(receiver) => receiver.blocking_recv().unwrap_or_else(|_| {
                Err(StoreError::Abandoned {
                    key: self.key.clone(),
                })
            }),
            None => Err(StoreError::Abandoned {
                key: self.key.clone(),
            }),
        }
    }

    /// Hands the buffered bytes to the uploading task, blocking while the channel is full.
    fn hand_over(&mut self) -> io::Result<()> {
        if let Some(failure) = &self.failure {
            return Err(io::Error::other(failure.full_message()));
        }
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = self.buffer.split().freeze();
        let sent = match &self.sender {
            Some(sender) => sender.blocking_send(Message::Data(chunk)).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The task stopped because the upload failed: surface its error.
        self.sender = None;
        let failure = match self.wait_result() {
            Err(e) => e,
            Ok(_) => StoreError::Abandoned {
                key: self.key.clone(),
            },
        };
        let reason = failure.full_message();
        self.failure = Some(failure);
        Err(io::Error::other(reason))
    }
}

impl io::Write for BlockingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(failure) = &self.failure {
            return Err(io::Error::other(failure.full_message()));
        }
        let room = CHUNK_SIZE - self.buffer.len();
        let n = buf.len().min(room);
        self.buffer.extend_from_slice(&buf[..n]);
        if self.buffer.len() >= CHUNK_SIZE {
            self.hand_over()?;
        }
        Ok(n)
    }

    /// Hands buffered bytes to the uploader; durability comes only with
    /// [`finish`](BlockingWriter::finish).
    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

/// A `std::io::Read` over an object, fed by a download task. Obtain one with
/// [`Location::blocking_reader`]. A storage failure mid-way is a read error, never an early
/// end of file.
#[derive(Debug)]
pub struct BlockingReader {
    receiver: mpsc::Receiver<Result<Bytes, StoreError>>,
    current: Bytes,
    done: bool,
    failure: Option<String>,
}

impl io::Read for BlockingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if let Some(reason) = &self.failure {
                return Err(io::Error::other(reason.clone()));
            }
            if self.done {
                return Ok(0);
            }
            match self.receiver.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(e)) => {
                    // Every later read fails too: a failed download never looks complete.
                    self.failure = Some(e.full_message());
                    return Err(io::Error::other(e));
                }
                None => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}
