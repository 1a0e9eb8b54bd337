//! The election and the fence on a paused clock: two candidates on one
//! Lease, one of whose requests can be made to hang, and time that moves
//! only when everything waits.

use super::*;
use async_trait::async_trait;
use gpu_claims_actors::api::{Kind, ObjRef};
use gpu_claims_actors::ports::{WriteError, WriteGuard, WriteOp};
use k8s_openapi::api::coordination::v1::Lease;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// One Lease in memory, with resourceVersions as an API server keeps them.
#[derive(Default)]
struct Server {
    lease: Mutex<Option<Lease>>,
    rv: Mutex<u64>,
}

/// A candidate's connection to the server; `hang` makes every request
/// wait forever (a network that swallows them), `refuse` fail at once.
struct Conn {
    server: Arc<Server>,
    hang: Arc<AtomicBool>,
    refuse: Arc<AtomicBool>,
}

impl Conn {
    async fn reach(&self) -> Result<(), LeaseError> {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.refuse.load(Ordering::SeqCst) {
            return Err(LeaseError::Other("connection refused".into()));
        }
        Ok(())
    }
    fn stamp(&self, mut l: Lease) -> Lease {
        let mut rv = self.server.rv.lock().unwrap();
        *rv += 1;
        l.metadata.resource_version = Some(rv.to_string());
        l
    }
}

#[async_trait]
impl LeaseApi for Conn {
    async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.reach().await?;
        Ok(self.server.lease.lock().unwrap().clone())
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        self.reach().await?;
        let mut cur = self.server.lease.lock().unwrap();
        if cur.is_some() {
            return Err(LeaseError::Conflict);
        }
        let l = self.stamp(lease.clone());
        *cur = Some(l.clone());
        Ok(l)
    }
    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        self.reach().await?;
        let mut cur = self.server.lease.lock().unwrap();
        if cur.as_ref().map(|c| &c.metadata.resource_version)
            != Some(&lease.metadata.resource_version)
        {
            return Err(LeaseError::Conflict);
        }
        let l = self.stamp(lease.clone());
        *cur = Some(l.clone());
        Ok(l)
    }
}

fn args() -> LeaseArgs {
    LeaseArgs {
        leader_elect: true,
        lease_name: "gpu-claims".into(),
        lease_namespace: "ns".into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    }
}

struct Candidate {
    fence: Arc<Fence>,
    conn: Arc<Conn>,
    hang: Arc<AtomicBool>,
    refuse: Arc<AtomicBool>,
    leading: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

fn candidate(server: &Arc<Server>, id: &str) -> Candidate {
    candidate_with(server, id, args())
}

fn candidate_with(server: &Arc<Server>, id: &str, a: LeaseArgs) -> Candidate {
    let fence = Arc::new(Fence::new(a.renew_deadline, a.lease_duration));
    let (hang, refuse) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let conn = Arc::new(Conn {
        server: server.clone(),
        hang: hang.clone(),
        refuse: refuse.clone(),
    });
    let leading = Arc::new(AtomicBool::new(false));
    let l = leading.clone();
    let e = Elector::new(
        conn.clone(),
        a,
        id.into(),
        Duration::from_secs(5),
        fence.clone(),
    );
    let task = tokio::spawn(e.run(move |on| l.store(on, Ordering::SeqCst)));
    Candidate {
        fence,
        conn,
        hang,
        refuse,
        leading,
        task,
    }
}

/// A candidate stops campaigning when it is dropped.
impl Drop for Candidate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Candidate {
    /// Steps simulated time until this candidate leads; the instant it did.
    async fn leads_within(&self, limit: Duration) -> Instant {
        step_until(|| self.leading.load(Ordering::SeqCst), limit).await
    }
}

/// Candidate "a" on `server`, once it leads (the first, within 5 s).
async fn first_leader(server: &Arc<Server>) -> Candidate {
    let a = candidate(server, "a");
    a.leads_within(Duration::from_secs(5)).await;
    a
}

fn holder(server: &Server) -> Option<String> {
    server
        .lease
        .lock()
        .unwrap()
        .as_ref()
        .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
}

async fn write(fence: &Fence) -> Result<(), WriteError> {
    let what = ObjRef::new(Kind::Claim, Some("t"), "a");
    fence.admit(WriteOp::UpdateStatus, &what).await.map(|_| ())
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// Runs `f` on a paused clock, against a Lease server of its own.
fn on_a_paused_clock(f: impl AsyncFnOnce(Arc<Server>)) {
    paused().block_on(f(Arc::new(Server::default())));
}

/// Steps simulated time until `until` holds; the instant it did.
async fn step_until(mut until: impl FnMut() -> bool, limit: Duration) -> Instant {
    let start = Instant::now();
    while !until() {
        assert!(start.elapsed() < limit, "did not happen within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Instant::now()
}

#[test]
fn a_leader_whose_renewal_hangs_stops_writing_before_a_standby_could_acquire() {
    on_a_paused_clock(async |server| {
        let a = first_leader(&server).await;
        let b = candidate(&server, "b");
        assert!(write(&a.fence).await.is_ok(), "the leader writes");
        // A's requests hang from now on: its renewals never come back.
        a.hang.store(true, Ordering::SeqCst);
        let hung = Instant::now();
        let fenced = step_until(|| !a.fence.open(), Duration::from_secs(60)).await;
        let b_leads = b.leads_within(Duration::from_secs(60)).await;
        assert!(
            fenced < b_leads,
            "A stopped writing {:?} after its renewals hung, B led after {:?}",
            fenced - hung,
            b_leads - hung
        );
        assert_eq!(write(&a.fence).await, Err(WriteError::Fenced));
        assert!(
            !a.leading.load(Ordering::SeqCst),
            "A stepped down, it did not hang with its renewal"
        );
        assert!(write(&b.fence).await.is_ok(), "the new leader writes");
    });
}

#[test]
fn a_paused_leader_that_wakes_after_expiry_writes_nothing() {
    on_a_paused_clock(async |server| {
        let a = first_leader(&server).await;
        let b = candidate(&server, "b");
        // A is frozen (SIGSTOP, a stalled VM): it renews nothing and
        // decides nothing, while its monotonic clock goes on.
        a.task.abort();
        b.leads_within(Duration::from_secs(60)).await;
        // A wakes: the first thing it would do is write; the fence says no.
        assert_eq!(write(&a.fence).await, Err(WriteError::Fenced));
        assert!(write(&b.fence).await.is_ok());
    });
}

#[test]
fn each_change_of_holder_is_a_transition() {
    on_a_paused_clock(async |server| {
        let a = first_leader(&server).await;
        let transitions = || {
            server
                .lease
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|l| l.spec.as_ref()?.lease_transitions)
        };
        assert_eq!(transitions(), Some(0), "created");
        let b = candidate(&server, "b");
        a.hang.store(true, Ordering::SeqCst);
        b.leads_within(Duration::from_secs(60)).await;
        assert_eq!(transitions(), Some(1), "a to b");
    });
}

#[test]
fn a_write_that_finds_the_term_lapsed_steps_the_leader_down_at_once() {
    on_a_paused_clock(async |server| {
        // Rounds every 4s: without the write, the lapse at the 10s renew
        // deadline would be noticed at the round after it.
        let slow = LeaseArgs {
            retry_period: Duration::from_secs(4),
            ..args()
        };
        let a = candidate_with(&server, "a", slow);
        a.leads_within(Duration::from_secs(5)).await;
        // A's renewals fail from now on, each at once.
        a.refuse.store(true, Ordering::SeqCst);
        let lapsed = step_until(|| !a.fence.open(), Duration::from_secs(30)).await;
        assert!(
            a.leading.load(Ordering::SeqCst),
            "the elector has not looked yet"
        );
        assert_eq!(write(&a.fence).await, Err(WriteError::Fenced));
        let stepped_down = step_until(
            || !a.leading.load(Ordering::SeqCst),
            Duration::from_secs(30),
        )
        .await;
        assert!(
            stepped_down - lapsed < Duration::from_secs(1),
            "stepped down {:?} after the lapse",
            stepped_down - lapsed
        );
    });
}

/// Candidate "a" once it leads and stops campaigning, with one write
/// admitted by its fence and not yet answered.
async fn leader_mid_write() -> (Arc<Server>, Candidate) {
    let server = Arc::new(Server::default());
    let a = first_leader(&server).await;
    a.task.abort();
    write(&a.fence).await.unwrap();
    (server, a)
}

#[test]
fn a_release_waits_for_the_writes_in_flight_then_frees_the_lease() {
    paused().block_on(async {
        let (server, a) = leader_mid_write().await;
        assert_eq!(a.fence.in_flight(), 1);
        let (fence, conn) = (a.fence.clone(), a.conn.clone());
        let release = tokio::spawn(async move {
            Elector::release(conn.as_ref(), "a", &fence, Duration::from_secs(5)).await
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            holder(&server).as_deref(),
            Some("a"),
            "not released while a write is in flight"
        );
        assert_eq!(
            write(&a.fence).await,
            Err(WriteError::Fenced),
            "closed at once"
        );
        a.fence.finished();
        release.await.unwrap();
        assert_eq!(
            holder(&server),
            None,
            "released once the write was answered"
        );
        // A standby takes the freed Lease at its next round.
        let b = candidate(&server, "b");
        b.leads_within(Duration::from_secs(5)).await;
    });
}

#[test]
fn a_release_with_a_write_unanswered_leaves_the_lease_to_expire() {
    paused().block_on(async {
        let (server, a) = leader_mid_write().await;
        Elector::release(a.conn.as_ref(), "a", &a.fence, Duration::from_secs(5)).await;
        assert_eq!(holder(&server).as_deref(), Some("a"));
    });
}

#[test]
fn lease_parameters_must_keep_one_writer() {
    let ok = args();
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(LeaseArgs::default().validate(), Ok(()), "the defaults");
    for (lease, renew, retry) in [(2, 30, 1), (10, 10, 2), (15, 10, 10), (15, 10, 0)] {
        let a = LeaseArgs {
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
            ..args()
        };
        assert!(a.validate().is_err(), "{lease}s {renew}s {retry}s");
    }
}
