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
use crate::spec::LocationOptions;
use crate::stream::ArtifactWriter;

/// Chunks in flight between the synchronous side and the uploading or downloading task.
pub const CHANNEL_CAPACITY: usize = 4;
/// Bytes the blocking writer gathers before handing them over.
pub const CHUNK_SIZE: usize = 256 * 1024;

impl LocationOptions {
    /// Upper bound of the bytes one streaming writer holds at a time: the part being filled,
    /// the parts in flight, and the hand-over channel of the blocking bridge.
    #[must_use]
    pub fn writer_memory_bound(&self) -> usize {
        self.part_size * (1 + self.max_in_flight_parts.max(1)) + CHANNEL_CAPACITY * CHUNK_SIZE
    }
}

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

/// Where a backup's archive is written: as it is, or sealed with the location's archive key
/// ([`crate::crypt`]). Obtain one with [`Location::archive_writer`].
pub enum ArchiveOut {
    /// Written as it is.
    Plain(BlockingWriter),
    /// Sealed with the location's key.
    Sealed(Box<crate::crypt::Sealer<BlockingWriter>>),
}

impl ArchiveOut {
    /// The key being written.
    #[must_use]
    pub fn key(&self) -> &str {
        match self {
            Self::Plain(w) => w.key(),
            Self::Sealed(s) => s.get_ref().key(),
        }
    }

    /// Seals the last chunk (when sealing), completes the upload and waits for it; returns the
    /// size stored.
    ///
    /// # Errors
    /// The upload's [`StoreError`]; nothing is stored then.
    pub fn finish(self) -> Result<u64, StoreError> {
        match self {
            Self::Plain(w) => w.finish(),
            Self::Sealed(mut s) => {
                let sealed = s.finish();
                let mut out = s.into_inner();
                match sealed {
                    Ok(()) => out.finish(),
                    // The upload's own failure, when that is why the last chunk was not
                    // written; otherwise the writer is dropped, which aborts the upload, so a
                    // cut archive is never completed.
                    Err(_) => Err(out.failure.take().unwrap_or(StoreError::Abandoned {
                        key: out.key().to_owned(),
                    })),
                }
            }
        }
    }
}

impl io::Write for ArchiveOut {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(w) => w.write(bytes),
            Self::Sealed(s) => s.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(w) => w.flush(),
            Self::Sealed(s) => s.flush(),
        }
    }
}

/// A backup's archive as read: as stored, or opened with the location's archive key when it
/// starts with [`crate::crypt::MAGIC`]. Obtain one with [`Location::archive_reader`].
pub struct ArchiveIn {
    state: ArchiveState,
}

enum ArchiveState {
    /// Not looked at yet: the first read decides.
    Unread(BlockingReader, Option<crate::crypt::ArchiveKey>),
    Plain(io::Chain<io::Cursor<Vec<u8>>, BlockingReader>),
    Opened(Box<crate::crypt::Opener<io::Chain<io::Cursor<Vec<u8>>, BlockingReader>>>),
    Taken,
}

impl io::Read for ArchiveIn {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let ArchiveState::Unread(..) = self.state {
            let ArchiveState::Unread(mut reader, key) =
                std::mem::replace(&mut self.state, ArchiveState::Taken)
            else {
                return Ok(0);
            };
            let magic = crate::crypt::MAGIC;
            let mut head = Vec::with_capacity(magic.len());
            (&mut reader)
                .take(magic.len() as u64)
                .read_to_end(&mut head)?;
            let sealed = head.as_slice() == magic;
            let rest = io::Cursor::new(head).chain(reader);
            self.state = match (sealed, key) {
                (false, _) => ArchiveState::Plain(rest),
                (true, Some(key)) => {
                    ArchiveState::Opened(Box::new(crate::crypt::Opener::new(rest, &key)?))
                }
                (true, None) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the archive is encrypted, and its location names no archive key \
                         (spec.config.archiveEncryptionSecret)",
                    ));
                }
            };
        }
        match &mut self.state {
            ArchiveState::Plain(r) => r.read(out),
            ArchiveState::Opened(r) => r.read(out),
            ArchiveState::Unread(..) | ArchiveState::Taken => Ok(0),
        }
    }
}

impl Location {
    /// The writer of a backup's archive at `key`: sealed when the location has an archive key
    /// ([`Location::with_archive_key`]), as it is otherwise. Must be called inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// As [`Location::blocking_writer`]; writing the header cannot fail before the upload.
    pub fn archive_writer(&self, key: &str) -> Result<ArchiveOut, StoreError> {
        let out = self.blocking_writer(key)?;
        Ok(match self.archive_key() {
            None => ArchiveOut::Plain(out),
            Some(archive_key) => ArchiveOut::Sealed(Box::new(
                crate::crypt::Sealer::new(out, archive_key).map_err(|_| StoreError::Abandoned {
                    key: key.to_owned(),
                })?,
            )),
        })
    }

    /// The reader of a backup's archive at `key`: an encrypted one is opened with the
    /// location's archive key (an error when it has none or another one), one that is not is
    /// read as it is.
    ///
    /// # Errors
    /// As [`Location::blocking_reader`].
    pub async fn archive_reader(&self, key: &str) -> Result<ArchiveIn, StoreError> {
        let reader = self.blocking_reader(key).await?;
        Ok(ArchiveIn {
            state: ArchiveState::Unread(reader, self.archive_key().cloned()),
        })
    }
}
