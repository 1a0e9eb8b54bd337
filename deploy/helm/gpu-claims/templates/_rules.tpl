{{- /*
The recording rules and alerts, shared by the PrometheusRule and
VictoriaMetrics' VMRule. Both replicas are scraped: the figures each
replica reads off the same cluster (gpu_claims_claims, the class, node,
namespace, quota and waiting gauges, the GPU-seconds) are taken as the max
over replicas (a replica reports them only once its caches have synced,
so half a world never counts held GPUs free; the max survives either
replica's loss); writes and conflicts come from the leader alone (a
standby writes nothing). Recorded names follow Prometheus'
level:metric:operation.
*/ -}}
{{- define "gpu-claims.ruleGroups" -}}
- name: gpu-claims.recording
  rules:
    - record: class:gpu_claims_gpus_capacity:max
      expr: max by (class) (gpu_claims_class_gpus_capacity)
    - record: class:gpu_claims_gpus_allocated:max
      expr: max by (class) (gpu_claims_class_gpus_allocated)
    - record: class:gpu_claims_gpus_budget:max
      expr: max by (class) (gpu_claims_class_gpus_budget)
    - record: class:gpu_claims_gpus_free:max
      expr: max by (class) (gpu_claims_class_gpus_free)
    - record: class:gpu_claims_waiting_sets:max
      expr: max by (class) (gpu_claims_class_waiting_sets)
    - record: class:gpu_claims_queue_head_waiting_seconds:max
      expr: max by (class) (gpu_claims_queue_head_waiting_seconds)
    # A DRA class's devices show per class: two classes over one
    # DeviceClass count the same devices, so the max by node and resource.
    - record: node_resource:gpu_claims_gpus_allocatable:max
      expr: max by (node, resource) (gpu_claims_node_gpus_allocatable)
    - record: node_resource:gpu_claims_gpus_allocated:max
      expr: max by (node, resource) (gpu_claims_node_gpus_allocated)
    - record: node_resource:gpu_claims_gpus_used_outside:max
      expr: max by (node, resource) (gpu_claims_node_gpus_used_outside)
    - record: node_resource:gpu_claims_gpus_free:max
      expr: max by (node, resource) (gpu_claims_node_gpus_free)
    - record: node_resource:gpu_claims_gpus_placeable:max
      expr: max by (node, resource) (gpu_claims_node_gpus_placeable)
    - record: namespace_class:gpu_claims_gpus_held:sum
      expr: sum by (namespace, class) (max by (namespace, class, phase) (gpu_claims_namespace_gpus))
    # Held with no VM using them: what a tenant keeps while its VMs are stopped.
    - record: namespace_class:gpu_claims_gpus_idle:max
      expr: max by (namespace, class) (gpu_claims_namespace_gpus{phase="Bound"})
    - record: namespace_class:gpu_claims_held_gpu_seconds:rate5m
      expr: max by (namespace, class) (rate(gpu_claims_held_gpu_seconds_total[5m]))
    - record: namespace_class:gpu_claims_attached_gpu_seconds:rate5m
      expr: max by (namespace, class) (rate(gpu_claims_attached_gpu_seconds_total[5m]))
    - record: namespace_quota:gpu_claims_gpus_used:ratio
      expr: max by (namespace, quota, class) (gpu_claims_quota_gpus_used) / max by (namespace, quota, class) (gpu_claims_quota_gpus_limit > 0)
    - record: namespace_reason:gpu_claims_waiting_sets:max
      expr: max by (namespace, reason) (gpu_claims_waiting_sets)
    - record: namespace_reason:gpu_claims_waiting_longest_seconds:max
      expr: max by (namespace, reason) (gpu_claims_waiting_longest_seconds)
    {{- if .Values.monitoring.cozystackGpuCount }}
    # Cozystack's GPU dashboards read these names, recorded there from DCGM
    # and kube-state-metrics' nvidia_com_gpu requests, which see no GPU
    # passed through to a VM: here the VM GPUs, as a second source.
    # Cozystack's own cluster:gpu_count:free follows for this source.
    - record: cluster:gpu_count:total
      expr: sum(node_resource:gpu_claims_gpus_allocatable:max)
      labels:
        source: gpu-claims
    - record: cluster:gpu_count:allocated
      expr: sum(node_resource:gpu_claims_gpus_allocated:max) + sum(node_resource:gpu_claims_gpus_used_outside:max)
      labels:
        source: gpu-claims
    - record: namespace:gpu_count:allocated
      expr: sum by (namespace) (namespace_class:gpu_claims_gpus_held:sum{namespace!~"cozy-.*|kube-.*"})
      labels:
        source: gpu-claims
    {{- end }}
# Sets at the gate: why they wait and for how long.
- name: gpu-claims.waiting
  rules:
    - alert: GPUClaimsQuotaFullWithWaitingSets
      expr: max by (namespace) (max by (namespace, quota, class) (gpu_claims_quota_gpus_used) >= max by (namespace, quota, class) (gpu_claims_quota_gpus_limit)) and on(namespace) (max by (namespace) (gpu_claims_waiting_sets{reason="OverQuota"}) > 0)
      for: 10m
      labels:
        severity: info
      annotations:
        summary: Namespace {{`{{ $labels.namespace }}`}} is at its GPU quota and VMs wait for GPUs
        description: A GPUQuota of the namespace is used up and sets wait at the gate with OverQuota. The tenant frees GPUs (stops a VM, deletes a claim) or the platform raises the quota.
    - alert: GPUClaimsClassFullWithWaitingSets
      expr: (max by (class) (gpu_claims_class_gpus_free) == 0) and on(class) (max by (class) (gpu_claims_class_waiting_sets) > 0)
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: GPUClass {{`{{ $labels.class }}`}} has no free GPU and VMs wait for one
        description: Every GPU the class can place on is held (or its budget is spent) while sets of it wait at the gate. Add nodes, raise the budget, or free GPUs (`kubectl gpu-claims status` shows who holds them, idle reservations included).
    - alert: GPUClaimsSetWaitingLong
      expr: max by (namespace, reason) (gpu_claims_waiting_longest_seconds) > {{ .Values.monitoring.alerts.setWaitingSeconds }}
      labels:
        severity: warning
      annotations:
        summary: A VM in {{`{{ $labels.namespace }}`}} has waited for its GPUs longer than {{ .Values.monitoring.alerts.setWaitingSeconds }}s ({{`{{ $labels.reason }}`}})
        description: Its launcher pod waits at the scheduling gate; the claims' Waiting condition says why, `kubectl gpu-claims status` lists the waiting sets.
    - alert: GPUClaimsGateWaitHigh
      expr: histogram_quantile(0.99, sum by (le) (rate(gpu_claims_gate_wait_seconds_bucket[10m]))) > 60
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: VMs wait more than a minute for their GPUs
        description: The 99th percentile of the time launcher pods wait at the scheduling gate is above 60 s. The claims' Waiting condition says why (over budget, no capacity).
# One writer: the Lease.
- name: gpu-claims.leader
  rules:
    - alert: GPUClaimsTwoLeaders
      expr: sum(gpu_claims_leader) > 1
      for: 1m
      labels:
        severity: critical
      annotations:
        summary: Two gpu-claims processes write at once
        description: More than one replica says it holds the Lease. Budgets hold against one writer only; check the Lease and the replicas' clocks and logs.
    - alert: GPUClaimsNoLeader
      # Also when no replica is scraped at all (every target gone).
      expr: (sum(gpu_claims_leader) or on() vector(0)) == 0
      for: 2m
      labels:
        severity: critical
      annotations:
        summary: No gpu-claims replica leads
        description: No process holds the Lease (or none is up). GPU VMs wait at the gate and no claim is placed or released.
# The controller's own work: its writes, its API server, its config, its webhook.
- name: gpu-claims.api
  rules:
    - alert: GPUClaimsConflictRate
      expr: sum(rate(gpu_claims_conflicts_total[5m])) / sum(rate(gpu_claims_writes_total[5m])) > 0.2
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: A fifth of gpu-claims' writes meet a newer object
        description: Someone else writes the same objects (a second controller? an election problem?).
    - alert: GPUClaimsApiTimeouts
      expr: sum(rate(gpu_claims_api_timeouts_total[5m])) > 0
      for: 5m
      labels:
        severity: warning
      annotations:
        summary: The API server does not answer gpu-claims in time
        description: Requests miss api.requestTimeout; a leader whose Lease requests time out for renewDeadline steps down.
    - alert: GPUClaimsSlowDecisions
      expr: histogram_quantile(0.99, sum by (le) (rate(gpu_claims_change_to_write_seconds_bucket[10m]))) > 1
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: gpu-claims takes over a second from a change to its write
        description: The controller is overloaded (CPU limits?).
    - alert: GPUClaimsConfigRefused
      expr: sum(increase(gpu_claims_config_reloads_total{result="refused"}[10m])) > 0
      labels:
        severity: warning
      annotations:
        summary: A gpu-claims config file was refused
        description: The running config stays; the log line says what is wrong with the new one.
    - alert: GPUClaimsWebhookRefusing
      expr: sum(rate(gpu_claims_webhook_requests_total{result=~"denied|bad_request"}[5m])) > 0
      for: 5m
      labels:
        severity: warning
      annotations:
        summary: The gate webhook refuses launcher pods
        description: Launcher pods of GPU VMs are denied (their VMI not found) or the API server sends reviews the webhook cannot read.
    - alert: GPUClaimsWebhookSlow
      expr: histogram_quantile(0.99, sum by (le) (rate(gpu_claims_webhook_latency_seconds_bucket[5m]))) > 1
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: The gate webhook answers slowly
        description: Its 99th percentile is above 1 s; the API server gives up at webhook.timeoutSeconds and, failing closed, refuses the pod.
# Nodes and devices: evacuations, lost GPUs, pods that cannot run where placed.
- name: gpu-claims.nodes
  rules:
    - alert: GPUClaimsEvacuationBlocked
      # evacuation.timeout's default: a blocked evacuation outlasts it.
      expr: max by (node) (gpu_claims_evacuation_vms{state="blocked"}) > 0
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: Evacuating node {{`{{ $labels.node }}`}} is blocked
        description: A GPU VM on the node has no VirtualMachine owner (stop it by hand), or a VM restarted off it waits at the gate (no other node can take it). `kubectl gpu-claims status` (EVACUATING) and the node's EvacuationBlocked Events say which.
    - alert: GPUClaimsDeviceNamedTwice
      # D8: a running VM's GPU that another ResourceClaim names too.
      expr: max(gpu_claims_devices_named_twice) > 0
      for: 1m
      labels:
        severity: critical
      annotations:
        summary: A GPU of a running VM is allocated to another ResourceClaim too
        description: Two pods may use one GPU. The GPUClaim and the ResourceClaim have Warning Events DeviceNamedTwice; stop the other pod (or the VM) to let one of them go. DeviceTaintRules of gpu-claims (D7) keep kube-scheduler off these GPUs; a job that tolerates gpu.cozystack.io/managed, or an allocation written by hand, does not.
    - alert: GPUClaimsClaimsLost
      # The leader's view only: the standby reports the same claims.
      expr: sum(gpu_claims_claims{phase="Lost"} and on(instance) (gpu_claims_leader == 1)) > 0
      for: 15m
      labels:
        severity: warning
      annotations:
        summary: GPUClaims have been Lost for 15 minutes
        description: Their nodes are NotReady or lost their devices; the claims keep their GPUs counted until the node returns or the claims are deleted.
    - alert: GPUClaimsPinnedPodsUnschedulable
      # The leader's gauge only: a standby remembers nothing (it decides nothing).
      expr: sum(gpu_claims_unschedulable_pods and on(instance) (gpu_claims_leader == 1)) > 0
      for: 15m
      labels:
        severity: warning
      annotations:
        summary: Launcher pods placement pinned stay Unschedulable
        description: The scheduler cannot place pods pinned to their claims' node (something took its room after placement). G7 deletes such a VMI after unschedulableGrace, so its VM starts again at the gate; pods that stay so for 15 minutes mean the VMs keep landing where they cannot run (kubectl describe pod shows the scheduler's message).
{{- end }}
