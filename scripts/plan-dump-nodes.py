#!/usr/bin/env python3
# A cluster's dump of nodes as kubectl get -o yaml writes one, for measuring
# what gpu-claims plan costs per object (issue 33, item 5):
#   scripts/plan-dump-nodes.py NODES OUT  (e.g. 100000 /tmp/nodes.yaml)
#   /usr/bin/time -v target/debug/gpu-claims plan --snapshot OUT
import sys
nodes = int(sys.argv[1]); out = open(sys.argv[2], "w"); w = out.write
w("apiVersion: gpu.cozystack.io/v1alpha1\nkind: GPUClass\nmetadata: {name: h200}\nspec: {resourceName: nvidia.com/H200}\n")
imgs = "\n".join(f"    - names: [registry.example.com/library/image-{i}@sha256:{'c'*64}, registry.example.com/library/image-{i}:v1.{i}]\n      sizeBytes: {100000000+i}" for i in range(20))
for n in range(nodes):
    w(f"""---
apiVersion: v1
kind: Node
metadata:
  name: node-{n}
  uid: 7f1c9a3e-0000-4000-8000-{n:012d}
  labels: {{kubernetes.io/hostname: node-{n}, kubernetes.io/os: linux, kubernetes.io/arch: amd64, topology.kubernetes.io/zone: zone-{n%3}, node.kubernetes.io/instance-type: gpu-8x}}
  annotations: {{node.alpha.kubernetes.io/ttl: "0", volumes.kubernetes.io/controller-managed-attach-detach: "true"}}
spec:
  podCIDR: 10.244.{n%250}.0/24
  providerID: metal://node-{n}
status:
  addresses: [{{type: InternalIP, address: 10.0.{n%250}.{n%200}}}, {{type: Hostname, address: node-{n}}}]
  capacity: {{cpu: "96", memory: 1Ti, pods: "110", ephemeral-storage: 900Gi, nvidia.com/H200: "8"}}
  allocatable: {{cpu: "95", memory: 1000Gi, pods: "110", ephemeral-storage: 850Gi, nvidia.com/H200: "8"}}
  conditions:
  - {{type: MemoryPressure, status: "False", reason: KubeletHasSufficientMemory, message: kubelet has sufficient memory available, lastHeartbeatTime: "2026-12-01T10:00:00Z", lastTransitionTime: "2026-11-01T10:00:00Z"}}
  - {{type: DiskPressure, status: "False", reason: KubeletHasNoDiskPressure, message: kubelet has no disk pressure, lastHeartbeatTime: "2026-12-01T10:00:00Z", lastTransitionTime: "2026-11-01T10:00:00Z"}}
  - {{type: PIDPressure, status: "False", reason: KubeletHasSufficientPID, message: kubelet has sufficient PID available, lastHeartbeatTime: "2026-12-01T10:00:00Z", lastTransitionTime: "2026-11-01T10:00:00Z"}}
  - {{type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status, lastHeartbeatTime: "2026-12-01T10:00:00Z", lastTransitionTime: "2026-11-01T10:00:00Z"}}
  daemonEndpoints: {{kubeletEndpoint: {{Port: 10250}}}}
  nodeInfo: {{machineID: {'d'*32}, systemUUID: {'e'*32}, bootID: {'f'*32}, kernelVersion: 6.8.0-49-generic, osImage: Talos (v1.9.1), containerRuntimeVersion: "containerd://2.0.1", kubeletVersion: v1.32.1, kubeProxyVersion: v1.32.1, operatingSystem: linux, architecture: amd64}}
  images:
{imgs}
""")
