//! The serve loop's promises: a client that does not finish its headers in
//! time is cut off while others are answered, and a shutdown ends the loop
//! with the requests under way answered.

use axum::Router;
use axum::routing::get;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every wait here is bounded: a loaded machine is slow, never stuck.
const DEADLINE: Duration = Duration::from_secs(30);

async fn started(
    timeout: Duration,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route("/", get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(gpu_claims_serve::serve(listener, router, timeout, async {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

/// One request on a fresh connection, and what came back.
async fn get_root(addr: std::net::SocketAddr) -> String {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(DEADLINE, c.read_to_string(&mut out))
        .await
        .expect("an answer within the deadline")
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_sent_too_slowly_are_cut_off_and_others_still_answered() {
    let (addr, _stop, _task) = started(Duration::from_millis(300)).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nhost:").await.unwrap();
    assert!(
        get_root(addr).await.ends_with("ok"),
        "another client is answered"
    );
    // The slow client's connection is closed: its read ends (EOF or a
    // 408), it never waits for more of its headers.
    let mut buf = Vec::new();
    let read = tokio::time::timeout(DEADLINE, slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was cut off");
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_ends_the_loop_and_closes_kept_alive_connections() {
    let (addr, stop, task) = started(Duration::from_secs(5)).await;
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 64];
    let n = tokio::time::timeout(DEADLINE, kept.read(&mut first))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    stop.send(()).unwrap();
    tokio::time::timeout(DEADLINE, task)
        .await
        .expect("the loop ends at shutdown")
        .unwrap();
    // The kept-alive connection is closed gracefully: its read ends.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(DEADLINE, kept.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the kept-alive connection was closed");
}
