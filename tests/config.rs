//! The config file: parsing, validation (an invalid file is refused whole),
//! and reload in a running process (file change, symlink swap, SIGHUP).
use gpu_claims::config::{Reloaded, Reloader, load, parse};
use gpu_claims_actors::Config;
use gpu_claims_actors::controller::ConfigChanged;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};
use gpu_claims_testbed::fixtures::*;
use gpu_claims_testbed::memory::sim::Sim;
use std::path::Path;
use std::time::Duration;

#[test]
fn the_default_config_file_is_the_defaults() {
    let c = load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/gpu-claims.yaml")).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.attachment_grace, Duration::from_secs(120));
    assert_eq!(parse("{}").unwrap(), Config::default());
}

#[test]
fn durations_are_humantime() {
    let c =
        parse("attachmentGrace: 1m30s\ntrace:\n  claims: [tenant-a/gpu]\nlog: {format: json}\n")
            .unwrap();
    assert_eq!(c.attachment_grace, Duration::from_secs(90));
    assert!(c.trace.claims.contains("tenant-a/gpu"));
}

#[test]
fn an_invalid_config_is_refused_with_a_reason() {
    for (text, says) in [
        ("attachmentGrace: soon\n", "attachmentGrace"),
        ("attachmentGrase: 2m\n", "attachmentGrase"),
        ("log: {filter: \"info,[bad\"}\n", "log.filter"),
        ("log: {format: xml}\n", "xml"),
        ("trace: {claims: [just-a-name]}\n", "trace.claims"),
        ("kubevirt: {enabled: maybe}\n", "enabled"),
        (
            "placement: {writesInFlight: 0}\n",
            "placement.writesInFlight",
        ),
        (
            "placement: {writesInFlight: 100000}\n",
            "placement.writesInFlight",
        ),
        ("placement: {writesInFlight: -1}\n", "writesInFlight"),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(
            e.contains(says),
            "{text:?} refused for {e:?}, which should name {says}"
        );
    }
}

/// A config file `c.yaml` holding `text` in a new directory (gone when the
/// returned guard is dropped), and a reloader of it running what it holds.
fn reloader_of(text: &str) -> (tempfile::TempDir, std::path::PathBuf, Reloader) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, text).unwrap();
    let r = Reloader::new(path.clone(), load(&path).unwrap());
    (dir, path, r)
}

#[test]
fn a_reloader_applies_changes_once_and_refuses_bad_files_whole() {
    let (_dir, path, mut r) = reloader_of("attachmentGrace: 2m\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert!(matches!(rt.block_on(r.reload()), Reloaded::Unchanged));
    std::fs::write(&path, "attachmentGrace: 1m\n").unwrap();
    assert!(
        matches!(rt.block_on(r.reload()), Reloaded::Applied(c) if c.attachment_grace == Duration::from_secs(60))
    );
    std::fs::write(&path, "attachmentGrace: 30s\nbogus: 1\n").unwrap();
    assert!(
        matches!(rt.block_on(r.reload()), Reloaded::Refused(e) if e.to_string().contains("bogus"))
    );
    // Back to the running config: nothing to apply.
    std::fs::write(&path, "attachmentGrace: 1m\n").unwrap();
    assert!(matches!(rt.block_on(r.reload()), Reloaded::Unchanged));
}

#[test]
fn an_empty_or_comment_only_config_is_refused_and_the_running_one_stays() {
    for text in [
        "",
        "\n\n",
        "# all commented out\n# attachmentGrace: 1m\n",
        "---\n# nothing\n",
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.to_string().contains("holds no settings"), "{text:?}: {e}");
        assert_eq!(e.metric_label(), "invalid");
    }
    let (_dir, path, mut r) = reloader_of("log: {format: json}\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    std::fs::write(&path, "# emptied by mistake\n").unwrap();
    assert!(matches!(rt.block_on(r.reload()), Reloaded::Refused(_)));
    std::fs::write(&path, "log: {format: json}\n").unwrap();
    assert!(
        matches!(rt.block_on(r.reload()), Reloaded::Unchanged),
        "the json config still runs"
    );
}

#[test]
fn a_fifo_swapped_in_for_the_config_is_refused_without_blocking_the_runtime() {
    let (_dir, path, mut r) = reloader_of("attachmentGrace: 2m\n");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // On a current-thread runtime, a read that blocked would block this
    // very task forever; the reload is refused at once instead, and a
    // timer on the same runtime still fires.
    let refused = rt.block_on(async {
        let ticker = tokio::spawn(tokio::time::sleep(Duration::from_millis(10)));
        let reload = r.reload().await;
        ticker.await.unwrap();
        reload
    });
    let Reloaded::Refused(e) = refused else {
        panic!("refused")
    };
    assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
    assert!(load(&path).is_err(), "at start too");
}

/// The whole path in a running process: the file changes on disk, the
/// watcher sees it, the supervisor gets the config, and a pending L6 grace
/// timer follows it. A bad file in between changes nothing.
#[test]
fn a_config_change_on_disk_reaches_a_running_controller_and_its_timers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("..data-1");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("gpu-claims.yaml"), "attachmentGrace: 1h\n").unwrap();
    // As a ConfigMap mount: the file is a symlink into a data directory that gets swapped.
    let path = dir.path().join("gpu-claims.yaml");
    std::os::unix::fs::symlink(data.join("gpu-claims.yaml"), &path).unwrap();
    let config = load(&path).unwrap();

    let sys = actix::System::with_tokio_rt(gpu_claims_testbed::runtime);
    sys.block_on(async move {
        let mut objs = vec![
            class("h200", "nvidia.com/GH100_H200").obj(),
            node("n1").gpus("nvidia.com/GH100_H200", 8).obj(),
        ];
        objs.extend(
            claim("t", "a")
                .bound("n1")
                .attached("vm-never")
                .with_allocation("nvidia.com/GH100_H200"),
        );
        let sim = Sim::start(config.clone(), &objs, None);
        let to = sim.supervisor().clone();
        let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        // Watching from here on: the swaps below are seen.
        let watched = Reloader::new(path.clone(), config).watch();
        tokio::spawn(watched.run(move |r| {
            let _ = seen_tx.send(
                r.as_ref()
                    .map(|c| c.attachment_grace)
                    .map_err(|e| e.to_string()),
            );
            if let Ok(c) = r {
                to.do_send(ConfigChanged(c));
            }
        }));
        let attached = |sim: &Sim| match sim.cluster.get(&ObjRef::new(Kind::Claim, Some("t"), "a"))
        {
            Some(Obj::Claim(c)) => c.attached_vmi_name().map(str::to_string),
            _ => None,
        };
        assert_eq!(attached(&sim).as_deref(), Some("vm-never"));

        let swap = |n: u32, text: &str| swap_in(&path, n, text, "gpu-claims.yaml.tmp");
        // A bad file: refused, the running config stays.
        swap(2, "attachmentGrace: [\n");
        let r = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(r.is_err(), "{r:?}");
        assert_eq!(
            sim.world().config().attachment_grace,
            Duration::from_secs(3600)
        );

        swap(3, "attachmentGrace: 1s\n");
        let r = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r, Ok(Duration::from_secs(1)));
        // The pending 1h timer now ends 1s after the attachment was first seen.
        let detached = tokio::time::timeout(Duration::from_secs(10), async {
            while attached(&sim).is_some() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(detached.is_ok(), "the new grace reached the running actor");
    });
}

/// As the kubelet updates a ConfigMap mount: `text` in a new data dir
/// `..data-<n>` beside the file at `path`, and `path`, a symlink, swapped
/// to it through the link `tmp`.
fn swap_in(path: &Path, n: u32, text: &str, tmp: &str) {
    let dir = path.parent().unwrap();
    let data = dir.join(format!("..data-{n}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("gpu-claims.yaml"), text).unwrap();
    let tmp = dir.join(tmp);
    std::os::unix::fs::symlink(data.join("gpu-claims.yaml"), &tmp).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One reload per change, for a plain file and for a ConfigMap-style
/// symlink swap: reading the file (the reload itself) is no change. (Each
/// read woke the watcher again: a bad file was refused, and counted, about
/// five times a second forever.)
#[test]
fn a_config_file_is_reloaded_once_per_change_plain_or_swapped() {
    let rt = gpu_claims_testbed::runtime();
    rt.block_on(async {
        for swapped in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("gpu-claims.yaml");
            let mut n = 0;
            let mut write = |text: &str| {
                n += 1;
                if swapped {
                    swap_in(&path, n, text, "..data_tmp");
                } else {
                    std::fs::write(&path, text).unwrap();
                }
            };
            write("attachmentGrace: 1h\n");
            let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
            let watched = Reloader::new(path.clone(), load(&path).unwrap()).watch();
            let task = tokio::spawn(watched.run(move |r| {
                let _ = tx.send(r.map(|c| c.attachment_grace).map_err(|e| e.to_string()));
            }));
            let mut next = async || {
                tokio::time::timeout(Duration::from_secs(10), seen.recv())
                    .await
                    .expect("a reload")
                    .unwrap()
            };
            write("attachmentGrace: [\n");
            assert!(next().await.is_err(), "swapped={swapped}: refused");
            write("attachmentGrace: 30s\n");
            assert_eq!(
                next().await,
                Ok(Duration::from_secs(30)),
                "swapped={swapped}: the next reload is the next change, not the bad file again"
            );
            write("attachmentGrace: 40s\n");
            assert_eq!(
                next().await,
                Ok(Duration::from_secs(40)),
                "swapped={swapped}"
            );
            task.abort();
        }
    });
}
