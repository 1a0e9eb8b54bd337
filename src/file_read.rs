//! Reading the files an operator points the controller at (its config, the
//! webhook's certificate and key) so that no file can hold it up: only a
//! regular file is read (a FIFO or a device swapped in at the path would
//! block a thread forever), opened without blocking, at most
//! `MAX_FILE_BYTES`, and, from the async runtime, on a blocking thread with
//! a deadline, so that `/healthz`, the webhook and the Lease's renewals go
//! on whatever the file system does.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most a config file or a PEM file may hold.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// How long a read off the runtime may take before it is given up.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file (a {0}); refused without reading")]
    NotRegular(&'static str),
    #[error("larger than {MAX_FILE_BYTES} bytes; refused")]
    TooLarge,
    #[error("not read within {READ_DEADLINE:?}; given up")]
    Timeout,
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else if t.is_dir() {
        "directory"
    } else {
        "special file"
    }
}

/// Reads a regular file of at most `MAX_FILE_BYTES`, without ever blocking
/// on what is not one. Blocking on a slow file system still: call it from
/// a blocking thread (`read_off_runtime`) where that matters.
pub fn read_bounded(path: &Path) -> Result<Vec<u8>, ReadError> {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    // The file opened, not the path looked at before: no swap in between.
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular(kind_of(meta.file_type())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut out)?;
    if out.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    Ok(out)
}

/// `read_bounded` on a blocking thread, given up after `READ_DEADLINE`.
pub async fn read_off_runtime(path: PathBuf) -> Result<Vec<u8>, ReadError> {
    let read = tokio::task::spawn_blocking(move || read_bounded(&path));
    match tokio::time::timeout(READ_DEADLINE, read).await {
        Ok(Ok(r)) => r,
        Ok(Err(join)) => Err(ReadError::Io(std::io::Error::other(join.to_string()))),
        Err(_) => Err(ReadError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_directory_and_a_huge_file_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            read_bounded(&fifo),
            Err(ReadError::NotRegular("FIFO"))
        ));
        assert!(matches!(
            read_bounded(dir.path()),
            Err(ReadError::NotRegular("directory"))
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert!(matches!(read_bounded(&big), Err(ReadError::TooLarge)));
        let ok = dir.path().join("ok");
        std::fs::write(&ok, "attachmentGrace: 1m\n").unwrap();
        assert_eq!(read_bounded(&ok).unwrap(), b"attachmentGrace: 1m\n");
    }
}
