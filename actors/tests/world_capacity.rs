//! The class capacity the world keeps as nodes and classes change is
//! always what counting over every node says (`capacity_of`), whatever the
//! order of changes: the class actors read it in O(1) on every decision.
use gpu_claims_actors::api::NodeFacts;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::fixtures::{class, node};
use gpu_claims_actors::rules::capacity_of;
use gpu_claims_actors::world::World;
use proptest::prelude::*;
use std::sync::Arc;

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
        let w = World::new(Config::default());
        for ch in changes {
            match ch {
                Change::Node { n, ready, gpus, pool, r2 } => {
                    let mut b = node(&format!("n{n}")).gpus(if r2 { R2 } else { R1 }, gpus.into()).ready(ready);
                    if pool {
                        b = b.label("pool", "x");
                    }
                    let facts = NodeFacts::from_node(&b.0).unwrap();
                    w.put_node(&facts.name.clone(), Some(Arc::new(facts)));
                }
                Change::NodeGone(n) => {
                    w.put_node(&format!("n{n}"), None);
                }
                Change::Class { c, pool, r2 } => {
                    let mut b = class(&format!("c{c}"), if r2 { R2 } else { R1 });
                    if pool {
                        b = b.selector("pool", "x");
                    }
                    w.put_class(&format!("c{c}"), Some(Arc::new(b.0)));
                }
                Change::ClassGone(c) => {
                    w.put_class(&format!("c{c}"), None);
                }
            }
            for c in w.classes.iter() {
                prop_assert_eq!(w.class_capacity(c.key()), capacity_of(&c, &w));
            }
        }
    }
}
