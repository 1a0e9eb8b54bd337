//! Slimming a dump: what `plan` keeps of a node and a pod.

use super::*;
use gpu_claims_actors::api::{NodeFacts, PodUse};

/// The generator's kubelet node and a worker pod, as a dump has them.
const FAT: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, uid: u1, labels: {kubernetes.io/hostname: n1, zone: a}, annotations: {a: b}}
spec: {podCIDR: 10.244.0.0/24, unschedulable: true, taints: [{key: k, value: v, effect: NoSchedule}]}
status:
  addresses: [{type: InternalIP, address: 10.0.0.1}]
  capacity: {cpu: "96", nvidia.com/H200: "8"}
  allocatable: {cpu: "95", memory: 1000Gi, pods: "110", nvidia.com/H200: "8"}
  conditions:
  - {type: MemoryPressure, status: "False", reason: KubeletHasSufficientMemory, message: ok}
  - {type: Ready, status: "True", reason: KubeletReady, message: ready}
  images: [{names: [registry.example.com/a:v1], sizeBytes: 100}]
  nodeInfo: {kubeletVersion: v1.32.1}
---
apiVersion: v1
kind: Pod
metadata: {name: w, namespace: ml, uid: p1, labels: {app: x}, annotations: {a: b}, finalizers: [f]}
spec:
  nodeName: n1
  tolerations: [{key: k, operator: Exists}]
  initContainers:
  - {name: side, image: s, restartPolicy: Always, resources: {limits: {nvidia.com/H200: "1"}}}
  - {name: init, image: i, resources: {requests: {cpu: "8"}}}
  containers:
  - name: main
    image: registry.example.com/trainer:v1
    env: [{name: A, value: b}]
    resources: {requests: {cpu: "4", memory: 32Gi}, limits: {cpu: "8", memory: 64Gi, nvidia.com/H200: "2"}}
  overhead: {cpu: 100m}
  volumes: [{name: d, emptyDir: {}}]
status:
  phase: Running
  conditions: [{type: Ready, status: "True"}]
  containerStatuses: [{name: main, ready: true, restartCount: 0, image: x, imageID: y}]
"#;

#[test]
fn a_slim_node_and_pod_are_what_the_controller_reads_of_the_fat_ones() {
    let mut reader = FAT.as_bytes();
    let fat: Vec<Obj> = serde_saphyr::read_with_options::<_, Value>(&mut reader, options())
        .map(|v| object(v.unwrap()).unwrap())
        .collect();
    let slimmed = parse(FAT).unwrap();
    let (Obj::Node(fat_node), Obj::Node(slim_node)) = (&fat[0], &slimmed[0]) else {
        panic!("a node first")
    };
    assert_eq!(
        NodeFacts::from_node(fat_node),
        NodeFacts::from_node(slim_node)
    );
    assert!(slim_node.status.as_ref().unwrap().images.is_none());
    let (Obj::Pod(fat_pod), Obj::Pod(slim_pod)) = (&fat[1], &slimmed[1]) else {
        panic!("a pod second")
    };
    let used = PodUse::from_pod(slim_pod).expect("bound and running");
    assert_eq!(Some(&used), PodUse::from_pod(fat_pod).as_ref());
    assert_eq!(
        used.requests.get("nvidia.com/H200"),
        3,
        "2 and a sidecar's 1"
    );
    assert_eq!(
        used.requests.get("cpu"),
        8_100,
        "the init container's 8 over the main one's 4, plus overhead"
    );
    assert_eq!(slim_pod.metadata.finalizers, fat_pod.metadata.finalizers);
    let json = serde_json::to_string(slim_pod).unwrap();
    assert!(
        !json.contains("registry.example.com") && !json.contains("env"),
        "{json}"
    );
}

/// Issue 58, item 4: a DeviceTaintRule as `kubectl get -o yaml` gives it
/// on Kubernetes 1.36 (`v1beta2`) is read, as `run` reads it, as v1.
#[test]
fn a_device_taint_rule_at_v1beta2_is_read_as_v1() {
    let text = r#"
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: maintenance}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: n1, device: gpu-vfio-0}
  taint: {key: example.com/maintenance, effect: NoExecute}
"#;
    let objs = parse(text).unwrap();
    let [Obj::DeviceTaintRule(r)] = objs.as_slice() else {
        panic!("{objs:?}")
    };
    assert_eq!(r.spec.taint.effect, "NoExecute");
}

/// Issue 61, item 4: a JSON dump (`kubectl get ... -o json`, one List with
/// `items` before `kind`) is read item by item, each as the YAML reader
/// reads it; a JSON object that is no List is one object; items of a
/// document that is no List, and a name twice, are refused.
#[test]
fn a_json_list_is_read_item_by_item_as_yaml_would_read_it() {
    let dir = std::env::temp_dir().join(format!("snapshot-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let yaml = parse(FAT).unwrap();
    let items: Vec<Value> = yaml.iter().map(gpu_claims_actors::api::to_json).collect();
    let list =
        serde_json::json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}});
    let json = load(&file("list.json", &format!("\n {list}"))).unwrap();
    assert_eq!(json, yaml);
    let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}});
    assert_eq!(load(&file("one.json", &node.to_string())).unwrap().len(), 1);
    let not_list = serde_json::json!({"items": [node], "kind": "NodeList"});
    let e = load(&file("nodelist.json", &not_list.to_string())).unwrap_err();
    assert!(
        e.to_string()
            .contains("kind NodeList is not one plan reads"),
        "{e}"
    );
    let twice = serde_json::json!({"items": [node, node], "kind": "List"});
    let e = load(&file("twice.json", &twice.to_string())).unwrap_err();
    assert!(e.to_string().contains("Node a is there already"), "{e}");
    let e = load(&file("bad.json", "{\"items\": [1,")).unwrap_err();
    assert!(e.to_string().contains("snapshot"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
