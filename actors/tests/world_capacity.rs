//! The class capacity the world keeps as nodes and classes change is
//! always what counting over every node says (`capacity_of`), whatever the
//! order of changes: the class actors read it in O(1) on every decision.
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_actors::rules::capacity_of;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::{class, node};
use proptest::prelude::*;

const R1: &str = "nvidia.com/a";
const R2: &str = "nvidia.com/b";

#[derive(Clone, Debug)]
enum Change {
    Node {
        n: u8,
        ready: bool,
        gpus: u8,
        pool: bool,
        r2: bool,
    },
    NodeGone(u8),
    Class {
        c: u8,
        pool: bool,
        r2: bool,
    },
    ClassGone(u8),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (0..6u8, any::<bool>(), 0..9u8, any::<bool>(), any::<bool>()).prop_map(
            |(n, ready, gpus, pool, r2)| Change::Node {
                n,
                ready,
                gpus,
                pool,
                r2
            }
        ),
        (0..6u8).prop_map(Change::NodeGone),
        (0..3u8, any::<bool>(), any::<bool>()).prop_map(|(c, pool, r2)| Change::Class {
            c,
            pool,
            r2
        }),
        (0..3u8).prop_map(Change::ClassGone),
    ]
}

proptest! {
    #[test]
    fn world_class_capacity_always_equals_a_count_over_every_node(changes in prop::collection::vec(change(), 1..60)) {
        let w = WorldWriter::new(Config::default());
        for ch in changes {
            match ch {
                Change::Node { n, ready, gpus, pool, r2 } => {
                    let mut b = node(&format!("n{n}")).gpus(if r2 { R2 } else { R1 }, gpus.into()).ready(ready);
                    if pool {
                        b = b.label("pool", "x");
                    }
                    w.load(Obj::Node(b.0));
                }
                Change::NodeGone(n) => {
                    w.forget(Kind::Node, &format!("n{n}"));
                }
                Change::Class { c, pool, r2 } => {
                    let mut b = class(&format!("c{c}"), if r2 { R2 } else { R1 });
                    if pool {
                        b = b.selector("pool", "x");
                    }
                    w.load(Obj::Class(b.0));
                }
                Change::ClassGone(c) => {
                    w.forget(Kind::Class, &format!("c{c}"));
                }
            }
            let mut wrong = Vec::new();
            w.for_each_class(|c| {
                let name = c.metadata.name.as_deref().unwrap_or_default();
                let (kept, counted) = (w.class_capacity(name), capacity_of(c, &w));
                if kept != counted {
                    wrong.push(format!("{name}: kept {kept}, counted {counted}"));
                }
            });
            prop_assert!(wrong.is_empty(), "{:?}", wrong);
        }
    }
}
