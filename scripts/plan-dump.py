#!/usr/bin/env python3
# A cluster's dump as `kubectl get -o yaml` writes one, for measuring what
# `gpu-claims plan` costs per object (issue 33, item 5):
#   scripts/plan-dump.py pods PODS NODES OUT   (e.g. 50000 2000 /tmp/pods.yaml):
#     worker pods as a training job's (images, env, volumes, probes, statuses)
#   scripts/plan-dump.py nodes NODES OUT       (e.g. 100000 /tmp/nodes.yaml):
#     nodes as a kubelet publishes them (images, addresses, nodeInfo)
#   /usr/bin/time -v target/debug/gpu-claims plan --snapshot OUT
import sys


def dump_pods(pods, nodes, w):
    for n in range(nodes):
        w(f"""---
apiVersion: v1
kind: Node
metadata:
  name: node-{n}
  labels: {{kubernetes.io/hostname: node-{n}, topology.kubernetes.io/zone: zone-{n%3}, node.kubernetes.io/instance-type: gpu-8x}}
status:
  conditions: [{{type: Ready, status: "True"}}]
  allocatable: {{cpu: "96", memory: 1Ti, pods: "110", ephemeral-storage: 900Gi, nvidia.com/H200: "8"}}
""")
    for p in range(pods):
        n = p % max(nodes, 1)
        w(f"""---
apiVersion: v1
kind: Pod
metadata:
  name: worker-{p}
  namespace: ml-{p%50}
  uid: 5f1c9a3e-0000-4000-8000-{p:012d}
  resourceVersion: "{1000+p}"
  creationTimestamp: "2026-11-01T10:00:00Z"
  labels: {{app: trainer, job: job-{p//8}, team: research, pod-template-hash: 7d9f8c6b5}}
  annotations: {{kubectl.kubernetes.io/restartedAt: "2026-11-01T09:59:00Z", prometheus.io/scrape: "true"}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: trainer-7d9f8c6b5, uid: 0a0a0a0a-1111-2222-3333-444455556666, controller: true, blockOwnerDeletion: true}}]
spec:
  nodeName: node-{n}
  serviceAccountName: trainer
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}, {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}}]
  containers:
  - name: trainer
    image: registry.example.com/research/trainer:v1.42.7
    args: [--epochs, "40", --batch-size, "256", --data, /data/imagenet]
    env:
    - {{name: NCCL_DEBUG, value: INFO}}
    - {{name: OMP_NUM_THREADS, value: "8"}}
    - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
    - {{name: POD_NAMESPACE, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
    resources:
      requests: {{cpu: "4", memory: 32Gi, nvidia.com/H200: "{p%2}"}}
      limits: {{cpu: "8", memory: 64Gi, nvidia.com/H200: "{p%2}"}}
    ports: [{{containerPort: 8080, name: metrics, protocol: TCP}}]
    volumeMounts: [{{name: data, mountPath: /data}}, {{name: shm, mountPath: /dev/shm}}, {{name: kube-api-access, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}}]
    readinessProbe: {{httpGet: {{path: /healthz, port: 8080}}, periodSeconds: 10}}
  volumes:
  - {{name: data, persistentVolumeClaim: {{claimName: imagenet}}}}
  - {{name: shm, emptyDir: {{medium: Memory, sizeLimit: 16Gi}}}}
  - {{name: kube-api-access, projected: {{sources: [{{serviceAccountToken: {{expirationSeconds: 3607, path: token}}}}]}}}}
status:
  phase: Running
  hostIP: 10.0.{n%250}.{n%200}
  podIP: 10.244.{p%250}.{p%200}
  startTime: "2026-11-01T10:00:05Z"
  qosClass: Burstable
  conditions: [{{type: Initialized, status: "True"}}, {{type: Ready, status: "True"}}, {{type: ContainersReady, status: "True"}}, {{type: PodScheduled, status: "True"}}]
  containerStatuses: [{{name: trainer, ready: true, restartCount: 0, image: registry.example.com/research/trainer:v1.42.7, imageID: "registry.example.com/research/trainer@sha256:{'a'*64}", containerID: "containerd://{'b'*64}", started: true, state: {{running: {{startedAt: "2026-11-01T10:00:07Z"}}}}}}]
""")


def dump_nodes(nodes, w):
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


what, args, path = sys.argv[1], [int(a) for a in sys.argv[2:-1]], sys.argv[-1]
with open(path, "w") as out:
    out.write("apiVersion: gpu.cozystack.io/v1alpha1\nkind: GPUClass\nmetadata: {name: h200}\nspec: {resourceName: nvidia.com/H200}\n")
    {"pods": dump_pods, "nodes": dump_nodes}[what](*args, out.write)
