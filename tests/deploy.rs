//! deploy/: every manifest parses and is of a kind and version a cluster
//! serves; the Deployment, webhook and config are what production needs;
//! the Helm chart's default render is the plain manifests; the Dockerfile
//! builds a static non-root image.
mod common;

use clap::Parser;
use gpu_claims_actors::ports::{Kind, WriteOp};
use gpu_claims_actors::rules::RuleId;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    gpu_claims_actors::yaml::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn manifests() -> Vec<Value> {
    docs(Path::new("deploy/manifests/gpu-claims.yaml"))
}

fn find<'a>(all: &'a [Value], kind: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("a {kind}"))
}

const KNOWN: &[(&str, &str)] = &[
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
    ),
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
];

#[test]
fn every_manifest_parses_and_is_a_kind_and_version_clusters_serve() {
    let mut files = vec!["deploy/manifests/gpu-claims.yaml".to_string()];
    for dir in ["deploy/crds", "deploy/helm/gpu-claims/crds"] {
        for e in std::fs::read_dir(dir).unwrap() {
            files.push(e.unwrap().path().display().to_string());
        }
    }
    let mut n = 0;
    for f in &files {
        for d in docs(Path::new(f)) {
            let pair = (
                d["apiVersion"].as_str().unwrap_or_default(),
                d["kind"].as_str().unwrap_or_default(),
            );
            assert!(KNOWN.contains(&pair), "{f}: {pair:?} is not a known kind");
            assert!(
                d["metadata"]["name"].is_string(),
                "{f}: {pair:?} has a name"
            );
            n += 1;
        }
    }
    assert!(n >= 16, "{n} documents");
    for crd in ["gpuclasses.yaml", "gpuclaims.yaml", "gpuallocations.yaml"] {
        assert_eq!(
            std::fs::read_to_string(format!("deploy/crds/{crd}")).unwrap(),
            std::fs::read_to_string(format!("deploy/helm/gpu-claims/crds/{crd}")).unwrap(),
            "the chart's CRDs are deploy/crds'"
        );
    }
}

#[test]
fn the_deployment_runs_two_hardened_replicas_with_probes_and_the_config_directory() {
    let all = manifests();
    let d = find(&all, "Deployment");
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(c["resources"]["requests"]["cpu"].is_string());
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The ConfigMap is mounted as a directory (no subPath), so that its
    // updates reach the file and the controller reloads them.
    let mounts = c["volumeMounts"].as_array().unwrap();
    let config = mounts.iter().find(|m| m["name"] == "config").unwrap();
    assert!(config.get("subPath").is_none());
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--config=/etc/gpu-claims/config/gpu-claims.yaml"));
    // Every flag is one the binary takes.
    let mut argv = vec!["gpu-claims"];
    argv.extend(&args);
    gpu_claims::cli::Cli::try_parse_from(argv).expect("the Deployment's args parse");
    // POD_NAMESPACE names the Lease's namespace, where the Role grants it.
    let env = c["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "POD_NAMESPACE"));
}

#[test]
fn the_webhook_gates_launcher_pods_only_fails_closed_and_gets_its_ca_from_cert_manager() {
    let all = manifests();
    let w = find(&all, "MutatingWebhookConfiguration");
    assert!(
        w["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            .as_str()
            .is_some_and(|s| s == "gpu-claims/gpu-claims-webhook")
    );
    let h = &w["webhooks"][0];
    assert_eq!(
        h["objectSelector"]["matchLabels"]["kubevirt.io"],
        "virt-launcher"
    );
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["clientConfig"]["service"]["path"], "/mutate");
    assert_eq!(h["rules"][0]["operations"], serde_json::json!(["CREATE"]));
    let cert = find(&all, "Certificate");
    let svc = find(&all, "Service");
    assert_eq!(
        cert["spec"]["dnsNames"][0],
        format!(
            "{}.gpu-claims.svc",
            svc["metadata"]["name"].as_str().unwrap()
        )
    );
    let pdb = find(&all, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}

#[test]
fn the_configmap_holds_a_config_the_controller_accepts() {
    let all = manifests();
    let cm = find(&all, "ConfigMap");
    let text = cm["data"]["gpu-claims.yaml"].as_str().unwrap();
    let shipped = gpu_claims::config::parse(text).expect("the shipped config parses");
    let mut documented =
        gpu_claims::config::parse(&std::fs::read_to_string("config/gpu-claims.yaml").unwrap())
            .unwrap();
    // In a cluster logs are JSON; everything else is the documented default.
    documented.log.format = shipped.log.format;
    assert_eq!(shipped, documented);
}

fn helm() -> Option<String> {
    let helm = std::env::var("GPU_CLAIMS_HELM").unwrap_or_else(|_| "helm".into());
    common::available("helm", Command::new(&helm).arg("version")).then_some(helm)
}

#[test]
fn the_charts_render_with_its_namespace_is_the_plain_manifests() {
    let Some(helm) = helm() else { return };
    let out = render(&helm, &["createNamespace=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = rendered(&out);
    let plain = manifests();
    assert_eq!(rendered.len(), plain.len());
    for (r, p) in rendered.iter().zip(&plain) {
        assert_eq!(
            r, p,
            "render and deploy/manifests differ at {} {}",
            p["kind"], p["metadata"]["name"]
        );
    }
    common::succeed(Command::new(&helm).args(["lint", "deploy/helm/gpu-claims"]));
}

/// `helm template` with `--set`s: the output, and whether it rendered.
fn render(helm: &str, sets: &[&str]) -> std::process::Output {
    let mut c = Command::new(helm);
    c.args([
        "template",
        "gpu-claims",
        "deploy/helm/gpu-claims",
        "--namespace",
        "gpu-claims",
        "--kube-version",
        "1.37.0",
    ]);
    for s in sets {
        c.args(["--set", s]);
    }
    c.output().unwrap()
}

#[test]
fn the_chart_refuses_two_replicas_without_leader_election() {
    let Some(helm) = helm() else { return };
    let out = render(&helm, &["leaderElection.enabled=false"]);
    assert!(!out.status.success(), "rendered two writers");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("replicas > 1 needs leaderElection.enabled=true"),
        "{err}"
    );
    // One replica without an election, or two with one, render.
    for sets in [
        &["leaderElection.enabled=false", "replicas=1"][..],
        &["replicas=3"][..],
    ] {
        let out = render(&helm, sets);
        assert!(
            out.status.success(),
            "{sets:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_dockerfile_builds_a_static_binary_onto_a_non_root_distroless_image() {
    let text = std::fs::read_to_string("Dockerfile").unwrap();
    let froms: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(froms[1].contains("distroless/static") || froms[1].contains("scratch"));
    assert!(
        text.contains("x86_64-unknown-linux-musl"),
        "a static binary"
    );
    let user = text.lines().rfind(|l| l.starts_with("USER ")).unwrap();
    assert!(!user.contains("root") && !user.contains(" 0"), "{user}");
    // The dependency layer needs every member's manifest, or cargo cannot
    // read the workspace.
    let manifest = std::fs::read_to_string("Cargo.toml").unwrap();
    let members = manifest
        .lines()
        .find(|l| l.starts_with("members = "))
        .expect("the workspace's members");
    for m in members.split('"').skip(1).step_by(2).filter(|m| *m != ".") {
        assert!(
            text.contains(&format!("COPY {m}/Cargo.toml {m}/Cargo.toml")),
            "the Dockerfile copies {m}'s manifest"
        );
    }
}

/// The documents a successful render printed.
fn rendered(out: &std::process::Output) -> Vec<Value> {
    gpu_claims_actors::yaml::documents(&String::from_utf8_lossy(&out.stdout)).unwrap()
}

#[test]
fn the_values_schema_and_the_guards_refuse_what_cannot_work() {
    let Some(helm) = helm() else { return };
    for (sets, says) in [
        (&["replicas=two"][..], "replicas: Invalid type"),
        (
            &["webhook.enabled=false"][..],
            "Additional property enabled is not allowed",
        ),
        (
            &["webhook.failurePolicy=Sometimes"][..],
            "must be one of the following",
        ),
        (
            &["leaderElection.leaseDuration=soon"][..],
            "leaseDuration: Does not match pattern",
        ),
        (
            &["webhook.certs.certManager=false"][..],
            "webhook.certs.certManager=false needs webhook.certs.caBundle",
        ),
        (&["http.auth=basic"][..], "must be one of the following"),
        (
            &[
                "http.metricsReaders[0].kind=Robot",
                "http.metricsReaders[0].name=r",
            ][..],
            "must be one of the following",
        ),
        (
            &["networkPolicy.metricsFrom[0].pods=all"][..],
            "Additional property pods is not allowed",
        ),
    ] {
        let out = render(&helm, sets);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sets:?} rendered");
        assert!(err.contains(says), "{sets:?}: {err}");
    }
    // The knobs render where Kubernetes reads them.
    let out = render(
        &helm,
        &[
            "nodeSelector.pool=system",
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
            "imagePullSecrets[0].name=registry",
            "podAnnotations.team=platform",
            "priorityClassName=",
            "topologySpread.whenUnsatisfiable=DoNotSchedule",
            "webhook.certs.certManager=false",
            "webhook.certs.caBundle=Zm9v",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = rendered(&out);
    let pod = &find(&docs, "Deployment")["spec"]["template"];
    assert_eq!(pod["spec"]["nodeSelector"]["pool"], "system");
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["spec"]["imagePullSecrets"][0]["name"], "registry");
    assert_eq!(pod["metadata"]["annotations"]["team"], "platform");
    assert!(pod["spec"].get("priorityClassName").is_none());
    assert_eq!(
        pod["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"],
        "DoNotSchedule"
    );
    assert!(docs.iter().all(|d| d["kind"] != "Certificate"));
    // One replica: no PDB (it would block every drain), no Namespace by default.
    let docs = rendered(&render(&helm, &["replicas=1"]));
    assert!(docs.iter().all(|d| d["kind"] != "PodDisruptionBudget"));
    assert!(docs.iter().all(|d| d["kind"] != "Namespace"));
}

#[test]
fn the_default_render_spreads_replicas_labels_them_and_sends_only_gpu_pods_to_the_webhook() {
    let Some(helm) = helm() else { return };
    let docs = rendered(&render(&helm, &[]));
    assert!(docs.iter().all(|d| d["kind"] != "Namespace"));
    let d = find(&docs, "Deployment");
    let labels = &d["metadata"]["labels"];
    for k in [
        "app.kubernetes.io/version",
        "app.kubernetes.io/managed-by",
        "helm.sh/chart",
    ] {
        assert!(labels[k].is_string(), "{k} in {labels}");
    }
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        spec["topologySpreadConstraints"][0]["topologyKey"],
        "kubernetes.io/hostname"
    );
    let hook = &find(&docs, "MutatingWebhookConfiguration")["webhooks"][0];
    let cel = hook["matchConditions"][0]["expression"].as_str().unwrap();
    for a in [
        gpu_claims_actors::api::CLASS_ANNOTATION,
        gpu_claims_actors::api::CLAIMS_ANNOTATION,
    ] {
        assert!(cel.contains(a), "{cel}");
    }
    // D5: launcher pods that ask through DRA are sent too.
    assert!(cel.contains("object.spec.resourceClaims"), "{cel}");
    assert!(find(&docs, "PodDisruptionBudget").is_object());
}

#[test]
fn the_monitoring_objects_render_on_request_and_their_alerts_name_real_metrics() {
    let Some(helm) = helm() else { return };
    let docs = rendered(&render(
        &helm,
        &[
            "monitoring.serviceMonitor.enabled=true",
            "monitoring.prometheusRule.enabled=true",
            "monitoring.vmServiceScrape.enabled=true",
            "monitoring.vmRule.enabled=true",
        ],
    ));
    for kind in ["ServiceMonitor", "VMServiceScrape"] {
        let ep = &find(&docs, kind)["spec"]["endpoints"][0];
        assert_eq!(
            (ep["port"].as_str(), ep["path"].as_str()),
            (Some("http-metrics"), Some("/metrics"))
        );
    }
    // /metrics asks for a token: each scrape presents the scraper's, and
    // the scraper is bound to the metrics reader.
    let sm = &find(&docs, "ServiceMonitor")["spec"]["endpoints"][0];
    assert_eq!(
        sm["authorization"]["credentials"]["name"],
        "gpu-claims-scraper-token"
    );
    let vm = &find(&docs, "VMServiceScrape")["spec"]["endpoints"][0];
    assert_eq!(vm["bearerTokenSecret"]["name"], "gpu-claims-scraper-token");
    let secret = find(&docs, "Secret");
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.name"],
        "gpu-claims-scraper"
    );
    let binding = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding" && d["roleRef"]["name"] == "gpu-claims-metrics-reader"
        })
        .expect("the scraper is bound to the metrics reader");
    assert_eq!(binding["subjects"][0]["name"], "gpu-claims-scraper");
    let groups = &find(&docs, "PrometheusRule")["spec"]["groups"];
    assert_eq!(groups, &find(&docs, "VMRule")["spec"]["groups"]);
    let rules = rules_of(groups);
    let expr = |name: &str| &rules.iter().find(|(a, _)| a == name).unwrap().1;
    assert_eq!(expr("GPUClaimsTwoLeaders"), "sum(gpu_claims_leader) > 1");
    assert!(expr("GPUClaimsNoLeader").contains("or on() vector(0)"));
    assert!(expr("GPUClaimsGateWaitHigh").contains("sum by (le)"));
    // The waiting alert's threshold is the value's.
    assert!(expr("GPUClaimsSetWaitingLong").ends_with("> 1800"));
    // Cozystack's names, from gpu-claims, as a source of their own.
    let cozy = groups[0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["record"] == "cluster:gpu_count:total")
        .expect("cluster:gpu_count:total is recorded");
    assert_eq!(cozy["labels"]["source"], "gpu-claims");
    // Every metric a rule reads is one the controller exposes, every
    // recorded name it reads one the rules record.
    let known = Known::of(groups);
    for (rule, e) in &rules {
        known.check(rule, e);
    }
    // Off by default.
    let plain = rendered(&render(&helm, &[]));
    for kind in [
        "ServiceMonitor",
        "PrometheusRule",
        "VMServiceScrape",
        "VMRule",
    ] {
        assert!(plain.iter().all(|d| d["kind"] != kind), "{kind}");
    }
}

/// The Kubernetes versions the chart claims (Chart.yaml's kubeVersion) up
/// to the newest the validator knows.
const KUBE_VERSIONS: [&str; 8] = [
    "1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0", "1.35.0", "1.36.0", "1.37.0",
];

#[test]
fn every_render_of_the_values_matrix_validates_against_each_kubernetes_version() {
    let Some(helm) = helm() else { return };
    let mut validator = Command::new("python3");
    validator.args(["-m", "kubernetes_validate", "--version"]);
    if !common::available("kubernetes-validate (PyPI)", &mut validator) {
        return;
    }
    let matrix: &[&[&str]] = &[
        &[],
        &["replicas=1", "leaderElection.enabled=false"],
        &["createNamespace=true"],
        &[
            "monitoring.serviceMonitor.enabled=true",
            "monitoring.prometheusRule.enabled=true",
            "monitoring.vmServiceScrape.enabled=true",
            "monitoring.vmRule.enabled=true",
            "monitoring.grafanaDashboard.enabled=true",
            "monitoring.dashboardConfigMap.enabled=true",
            "monitoring.cozystackGpuCount=false",
        ],
        &[
            "webhook.certs.certManager=false",
            "webhook.certs.caBundle=Zm9v",
        ],
        &[
            "nodeSelector.pool=system",
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
            "tolerations[0].effect=NoSchedule",
            "imagePullSecrets[0].name=registry",
            "podAnnotations.team=platform",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
        ],
        &[
            "topologySpread.enabled=false",
            "priorityClassName=",
            "podDisruptionBudget.enabled=false",
        ],
        &[
            "replicas=3",
            "webhook.failurePolicy=Ignore",
            "webhook.timeoutSeconds=10",
        ],
        &[
            "networkPolicy.enabled=true",
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
            "http.metricsReaders[0].kind=ServiceAccount",
            "http.metricsReaders[0].name=prometheus",
            "http.metricsReaders[0].namespace=monitoring",
            "monitoring.serviceMonitor.enabled=true",
        ],
        &[
            "http.auth=none",
            "http.tls=false",
            "networkPolicy.enabled=true",
            "monitoring.vmServiceScrape.enabled=true",
        ],
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, sets) in matrix.iter().enumerate() {
        let out = render(&helm, sets);
        assert!(
            out.status.success(),
            "{sets:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let f = dir.path().join(format!("render-{i}.yaml"));
        std::fs::write(&f, &out.stdout).unwrap();
        files.push(f);
    }
    for v in KUBE_VERSIONS {
        // A render that does not validate against Kubernetes `v` fails here.
        common::succeed(
            Command::new("python3")
                .args([
                    "-m",
                    "kubernetes_validate",
                    "--strict",
                    "--quiet",
                    "--no-warn",
                    "-k",
                    v,
                ])
                .args(&files),
        );
    }
}

#[test]
fn the_endpoints_need_rbacs_leave_and_the_network_policy_opens_only_the_webhook_to_all() {
    let Some(helm) = helm() else { return };
    let docs = rendered(&render(&helm, &[]));
    let args =
        find(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--http-auth=kubernetes"),
        "{args}"
    );
    let role = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))["rules"][0]
            .clone()
    };
    assert_eq!(
        role("gpu-claims-metrics-reader")["nonResourceURLs"],
        serde_json::json!(["/metrics"])
    );
    assert_eq!(
        role("gpu-claims-debug-reader")["nonResourceURLs"],
        serde_json::json!(["/debug", "/debug/*"])
    );
    assert!(
        docs.iter().all(|d| d["kind"] != "NetworkPolicy"),
        "off by default"
    );
    // Port 8080 speaks TLS with the webhook's certificate; the probes follow.
    let c = &find(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--http-tls-cert-file=/etc/gpu-claims/tls/tls.crt")
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
    let scrape = rendered(&render(&helm, &["monitoring.serviceMonitor.enabled=true"]));
    let ep = &find(&scrape, "ServiceMonitor")["spec"]["endpoints"][0];
    assert_eq!(ep["scheme"], "https");
    assert_eq!(ep["tlsConfig"]["serverName"], "gpu-claims.gpu-claims.svc");
    assert_eq!(ep["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");

    let docs = rendered(&render(
        &helm,
        &[
            "networkPolicy.enabled=true",
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
        ],
    ));
    let ingress = find(&docs, "NetworkPolicy")["spec"]["ingress"].clone();
    assert!(
        ingress[0].get("from").is_none(),
        "the API server reaches the webhook: {ingress}"
    );
    assert_eq!(ingress[0]["ports"][0]["port"], "webhook");
    assert_eq!(
        ingress[1]["from"][0]["namespaceSelector"]["matchLabels"]["name"],
        "monitoring"
    );
    assert_eq!(ingress[1]["ports"][0]["port"], "http-metrics");

    // Open endpoints: no reviews, so no grant to make them.
    let docs = rendered(&render(&helm, &["http.auth=none"]));
    let text = serde_json::to_string(&docs).unwrap();
    assert!(!text.contains("tokenreviews") && !text.contains("metrics-reader"));
}

/// A rule group list's rules: (alert or record name, expression).
fn rules_of(groups: &Value) -> Vec<(String, String)> {
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap();
            (name.to_string(), r["expr"].as_str().unwrap().to_string())
        })
        .collect()
}

/// What a query may read: the families the controller exposes, and the
/// names the chart's rules record (Cozystack checks its dashboards so).
struct Known {
    families: Vec<String>,
    records: Vec<String>,
}

impl Known {
    fn of(groups: &Value) -> Self {
        let mut registry = prometheus_client::registry::Registry::default();
        let world =
            gpu_claims_actors::world::WorldWriter::new(gpu_claims_actors::Config::default())
                .reader();
        let m = gpu_claims::metrics::Metrics::register(&mut registry, Some(world));
        // A family shows once it has a series: give each one.
        m.write(WriteOp::Create, Kind::Claim, RuleId::G2, "ok");
        m.change_to_write
            .get_or_create(&gpu_claims::metrics::RuleLabel { rule: "G2".into() })
            .observe(0.01);
        m.timeouts
            .get_or_create(&gpu_claims::metrics::VerbKindLabels {
                verb: "get".into(),
                kind: "Lease".into(),
            })
            .inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let families = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect();
        let records = groups
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .filter_map(|r| r["record"].as_str())
            .map(str::to_string)
            .collect();
        Known { families, records }
    }

    /// Panics unless `expr` parses as PromQL and every `gpu_claims_`
    /// metric and every `level:metric:operation` name it reads is known.
    fn check(&self, what: &str, expr: &str) {
        // Grafana's variables as Grafana fills them in.
        let filled = expr.replace("$__range", "1h").replace("$namespace", ".*");
        if let Err(e) = promql_parser::parser::parse(&filled) {
            panic!("{what}: {expr} is not PromQL: {e}");
        }
        let names = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .filter(|w| !w.is_empty());
        for word in names {
            if word.matches(':').count() >= 2 {
                assert!(
                    self.records.iter().any(|r| r == word),
                    "{what} reads {word}, which no rule records: {:?}",
                    self.records
                );
            } else if word.starts_with("gpu_claims_") {
                let known = self.families.iter().any(|f| {
                    word == f
                        || ["_total", "_bucket", "_count", "_sum"]
                            .iter()
                            .any(|s| word.strip_suffix(s) == Some(f))
                });
                assert!(
                    known,
                    "{what} reads {word}, which is not exposed: {:?}",
                    self.families
                );
            }
        }
    }
}

/// Grafana's panel types a dashboard of ours may use (built into Grafana
/// 11 and 12; `row` is the layout's own).
const PANEL_TYPES: [&str; 7] = [
    "row",
    "stat",
    "timeseries",
    "table",
    "bargauge",
    "gauge",
    "text",
];

/// Issue 38, item 3: the dashboard renders as grafana-operator's
/// GrafanaDashboard and as a sidecar's ConfigMap, both carrying
/// files/dashboard.json; it is a dashboard model Grafana 11.6 (Cozystack's)
/// and 12 load; every query reads only metrics the controller exposes or
/// names the chart's rules record.
#[test]
fn the_dashboard_renders_for_grafana_operator_and_the_sidecar_and_reads_only_known_metrics() {
    let Some(helm) = helm() else { return };
    let docs = rendered(&render(
        &helm,
        &[
            "monitoring.grafanaDashboard.enabled=true",
            "monitoring.dashboardConfigMap.enabled=true",
            "monitoring.dashboardConfigMap.annotations.grafana_folder=GPU",
            "monitoring.prometheusRule.enabled=true",
        ],
    ));
    let file = std::fs::read_to_string("deploy/helm/gpu-claims/files/dashboard.json").unwrap();
    let model: Value = serde_json::from_str(&file).unwrap();
    let gd = find(&docs, "GrafanaDashboard");
    assert_eq!(gd["apiVersion"], "grafana.integreatly.org/v1beta1");
    // grafana-operator requires instanceSelector; Cozystack's Grafana
    // carries dashboards: grafana.
    assert_eq!(
        gd["spec"]["instanceSelector"]["matchLabels"]["dashboards"],
        "grafana"
    );
    let from_gd: Value = serde_json::from_str(gd["spec"]["json"].as_str().unwrap()).unwrap();
    assert_eq!(from_gd, model);
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "gpu-claims-dashboard")
        .expect("the sidecar's ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "GPU");
    let from_cm: Value =
        serde_json::from_str(cm["data"]["gpu-claims.json"].as_str().unwrap()).unwrap();
    assert_eq!(from_cm, model);

    // The model: what Grafana reads. Schema 41 is Grafana 11.6's (12's is
    // 42); an older one is migrated forward on load, a newer one is not.
    for k in [
        "uid",
        "title",
        "panels",
        "templating",
        "time",
        "schemaVersion",
    ] {
        assert!(model.get(k).is_some(), "the dashboard has {k}");
    }
    let schema = model["schemaVersion"].as_u64().unwrap();
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");
    let vars = model["templating"]["list"].as_array().unwrap();
    assert!(
        vars.iter().any(|v| v["type"] == "datasource"
            && v["name"] == "ds_prometheus"
            && v["query"] == "prometheus"),
        "the datasource is a variable, resolved by Grafana for either provisioner"
    );
    let groups = &find(&docs, "PrometheusRule")["spec"]["groups"];
    let known = Known::of(groups);
    let mut ids = std::collections::BTreeSet::new();
    let mut titles = Vec::new();
    for p in model["panels"].as_array().unwrap() {
        let title = p["title"].as_str().unwrap();
        let kind = p["type"].as_str().unwrap();
        assert!(PANEL_TYPES.contains(&kind), "{title}: type {kind}");
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "{title}: id repeated"
        );
        let g = &p["gridPos"];
        let (x, w, h) = (
            g["x"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24 && w > 0 && h > 0, "{title}: gridPos {g}");
        assert!(g["y"].is_u64(), "{title}: gridPos {g}");
        if kind == "row" {
            continue;
        }
        titles.push(title.to_string());
        assert_eq!(p["datasource"]["uid"], "${ds_prometheus}", "{title}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title} queries something");
        let refs: std::collections::BTreeSet<&str> = targets
            .iter()
            .map(|t| t["refId"].as_str().unwrap())
            .collect();
        assert_eq!(refs.len(), targets.len(), "{title}: refIds repeat");
        for t in targets {
            known.check(title, t["expr"].as_str().unwrap());
        }
    }
    for v in vars.iter().filter(|v| v["type"] == "query") {
        // Grafana's label_values(series, label): the series is PromQL.
        let def = v["definition"].as_str().unwrap();
        let series = def
            .strip_prefix("label_values(")
            .and_then(|r| r.rsplit_once(','))
            .map_or(def, |(series, _)| series);
        known.check("a variable", series);
    }
    // What issue 38 asked the dashboard to show.
    for want in [
        "GPUs allocated by class",
        "GPUs by node",
        "Free GPUs by class",
        "Idle reservations by tenant",
        "Waiting sets by reason",
        "Longest wait by reason",
        "Quota use",
        "GPU-hours by tenant",
        "Change to write, p99 by rule",
        "Leader",
        "Errors",
    ] {
        assert!(
            titles.iter().any(|t| t == want),
            "a panel {want}: {titles:?}"
        );
    }
    // Off by default.
    let plain = rendered(&render(&helm, &[]));
    assert!(plain.iter().all(|d| d["kind"] != "GrafanaDashboard"));
    assert!(
        plain
            .iter()
            .all(|d| d["metadata"]["name"] != "gpu-claims-dashboard")
    );
}

/// Issue 38, item 1: every metric family the controller exposes is in
/// docs/operations.md, with its labels.
#[test]
fn every_metric_the_controller_exposes_is_documented_in_operations() {
    let docs = std::fs::read_to_string("docs/operations.md").unwrap();
    let known = Known::of(&serde_json::json!([]));
    for f in known
        .families
        .iter()
        .filter(|f| f.starts_with("gpu_claims_"))
    {
        // Counters are documented as exposed, with `_total`; histograms
        // with their unit.
        let documented = [f.clone(), format!("{f}_total")]
            .iter()
            .any(|n| docs.contains(&format!("`{n}{{")) || docs.contains(&format!("`{n}`")));
        assert!(documented, "{f} is not in docs/operations.md");
    }
}
