//! Watching files that are reloaded when they change: the config file and
//! the webhook's certificate and key. The directories are watched, not the
//! files: a ConfigMap or Secret mount swaps a `..data` symlink, which
//! replaces the files without writing them.
//!
//! Only changes count: a read of the file (our own reload reads it) is an
//! event too, and reacting to it would reload forever, several times a
//! second. A burst of events (a swap is several) is one change.

use notify::event::{EventKind, ModifyKind};
use notify::{RecommendedWatcher, Watcher};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long events must stop before a burst counts as one change.
const SETTLE: Duration = Duration::from_millis(200);

/// Whether an event is a change of one of `names` in a watched directory
/// (or of the mount's `..data` swap).
fn is_change(ev: &notify::Event, names: &BTreeSet<OsString>) -> bool {
    let kind = match ev.kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Name(_) | ModifyKind::Any) => true,
        EventKind::Modify(ModifyKind::Metadata(_) | ModifyKind::Other) => false,
        EventKind::Access(_) | EventKind::Other | EventKind::Any => false,
    };
    kind && ev.paths.iter().any(|p| {
        p.file_name()
            .is_some_and(|n| names.contains(n) || n.to_string_lossy().starts_with(".."))
    })
}

/// The changes of some files: `next` returns once per change.
pub struct FileChanges {
    rx: mpsc::UnboundedReceiver<()>,
    _watcher: Option<RecommendedWatcher>,
}

impl FileChanges {
    /// Watches `files`; what cannot be watched is logged, and `next` then
    /// only returns for `also` (SIGHUP for the config).
    pub fn watch(files: &[&Path]) -> (Self, mpsc::UnboundedSender<()>) {
        let (tx, rx) = mpsc::unbounded_channel::<()>();
        let names: BTreeSet<OsString> = files
            .iter()
            .filter_map(|f| f.file_name().map(|n| n.to_os_string()))
            .collect();
        let dirs: BTreeSet<PathBuf> = files
            .iter()
            .map(|f| {
                f.parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .to_path_buf()
            })
            .collect();
        let events = tx.clone();
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            if ev.is_ok_and(|ev| is_change(&ev, &names)) {
                let _ = events.send(());
            }
        });
        let watcher = match watcher {
            Ok(mut w) => {
                for dir in &dirs {
                    if let Err(e) = w.watch(dir, notify::RecursiveMode::NonRecursive) {
                        tracing::warn!(error = %e, dir = %dir.display(), "cannot watch a directory; changes there are not reloaded");
                    }
                }
                Some(w)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch files; changes are not reloaded");
                None
            }
        };
        (
            Self {
                rx,
                _watcher: watcher,
            },
            tx,
        )
    }

    /// Waits for the next change (a burst of events is one); None when
    /// nothing can tell of changes any more.
    pub async fn next(&mut self) -> Option<()> {
        self.rx.recv().await?;
        self.settle().await;
        Some(())
    }

    /// Whether another change comes within SETTLE (its burst then
    /// settled): a file read between its truncation and its write reads
    /// as empty, and the rest of the write follows at once.
    pub async fn follows(&mut self) -> bool {
        match tokio::time::timeout(SETTLE, self.rx.recv()).await {
            Ok(Some(())) => {
                self.settle().await;
                true
            }
            Ok(None) | Err(_) => false,
        }
    }

    /// Waits until events stop for SETTLE.
    async fn settle(&mut self) {
        while let Ok(Some(())) = tokio::time::timeout(SETTLE, self.rx.recv()).await {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, DataChange, MetadataKind, RenameMode};

    #[test]
    fn reads_and_metadata_are_not_changes_and_other_files_are_not_ours() {
        let names = BTreeSet::from([OsString::from("config.yaml")]);
        let ev =
            |kind: EventKind, path: &str| notify::Event::new(kind).add_path(PathBuf::from(path));
        let yes = [
            ev(
                EventKind::Modify(ModifyKind::Data(DataChange::Any)),
                "/c/config.yaml",
            ),
            ev(EventKind::Create(CreateKind::File), "/c/config.yaml"),
            ev(
                EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                "/c/config.yaml",
            ),
            ev(EventKind::Create(CreateKind::Any), "/c/..data"),
        ];
        for e in &yes {
            assert!(is_change(e, &names), "{e:?}");
        }
        let no = [
            ev(EventKind::Access(AccessKind::Any), "/c/config.yaml"),
            ev(
                EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
                "/c/config.yaml",
            ),
            ev(
                EventKind::Modify(ModifyKind::Data(DataChange::Any)),
                "/c/other.yaml",
            ),
        ];
        for e in &no {
            assert!(!is_change(e, &names), "{e:?}");
        }
    }

    /// A refusal is held back while a change follows at once (the rest of
    /// a write the reload read halfway): `follows` says so, and says no
    /// when the file stays as it is.
    #[tokio::test(start_paused = true)]
    async fn a_change_within_the_settle_window_follows_and_silence_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let (mut changes, tx) = FileChanges::watch(&[&dir.path().join("c.yaml")]);
        assert!(!changes.follows().await, "nothing changed");
        tx.send(()).unwrap();
        tx.send(()).unwrap();
        assert!(changes.follows().await, "a burst follows");
        assert!(!changes.follows().await, "the burst was one change");
    }
}
