{{- /*
The alerts, shared by the PrometheusRule and VictoriaMetrics' VMRule.
Both replicas are scraped: gauges that each replica reports about the
same cluster (gpu_claims_claims) are read from the leader only, and
writes and conflicts come from the leader alone (a standby writes
nothing).
*/ -}}
{{- define "gpu-claims.alertGroups" -}}
- name: gpu-claims
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
    - alert: GPUClaimsGateWaitHigh
      expr: histogram_quantile(0.99, sum by (le) (rate(gpu_claims_gate_wait_seconds_bucket[10m]))) > 60
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: VMs wait more than a minute for their GPUs
        description: The 99th percentile of the time launcher pods wait at the scheduling gate is above 60 s. The claims' Waiting condition says why (over budget, no capacity).
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
    - alert: GPUClaimsEvacuationBlocked
      # evacuation.timeout's default: a blocked evacuation outlasts it.
      expr: max by (node) (gpu_claims_evacuation_vms{state="blocked"}) > 0
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: Evacuating node {{`{{ $labels.node }}`}} is blocked
        description: A GPU VM on the node has no VirtualMachine owner (stop it by hand), or a VM restarted off it waits at the gate (no other node can take it). `kubectl gpu-claims status` (EVACUATING) and the node's EvacuationBlocked Events say which.
    - alert: GPUClaimsConfigRefused
      expr: sum(increase(gpu_claims_config_reloads_total{result="refused"}[10m])) > 0
      labels:
        severity: warning
      annotations:
        summary: A gpu-claims config file was refused
        description: The running config stays; the log line says what is wrong with the new one.
    - alert: GPUClaimsSlowDecisions
      expr: histogram_quantile(0.99, sum by (le) (rate(gpu_claims_change_to_write_seconds_bucket[10m]))) > 1
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: gpu-claims takes over a second from a change to its write
        description: The controller is overloaded (CPU limits?).
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
