//! What the indexes answer, without a scan: the VMIs that name a
//! template, ask for a DeviceClass or request a resource; the live classes
//! that serve a resource or a DeviceClass; a namespace's GPUQuotas and
//! usage; the claims of a VMI, a node or a class; what is allocated where;
//! the nodes being evacuated and their restart marks; a VMI's launchers;
//! the nodes of a hostname.

use crate::api::is_deleting;
use crate::world::*;
use std::collections::BTreeSet;

impl World {
    /// G3: the nodes whose `kubernetes.io/hostname` label is `hostname`.
    pub fn nodes_with_hostname(&self, hostname: &str) -> BTreeSet<String> {
        self.idx
            .nodes_by_hostname
            .get(hostname)
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// D5: the VMIs whose `spec.resourceClaims` name the template `ns/name`.
    pub fn vmis_naming_template(&self, template: &str) -> BTreeSet<String> {
        self.idx
            .vmis_by_template
            .get(template)
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// D5: the VMIs naming a template one of whose requests names the
    /// DeviceClass `dc`. Asked when a DRA class comes or goes (rare): the
    /// templates VMIs name are looked at, not the VMIs.
    pub fn vmis_asking_device_class(&self, dc: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for e in self.idx.vmis_by_template.iter() {
            let names_dc = self.resource_claim_template(e.key()).is_some_and(|t| {
                crate::dra::template::requests(crate::dra::template::template_spec(&t))
                    .iter()
                    .any(|r| crate::dra::template::device_class(r) == Some(dc))
            });
            if names_dc {
                out.extend(e.value().iter().cloned());
            }
        }
        out
    }

    /// Whether any GPUClass (being deleted or not) serves `resource`.
    pub fn serves(&self, resource: &str) -> bool {
        self.idx.classes_by_resource.contains_key(resource)
    }

    /// The classes not being deleted that serve `resource`.
    pub fn live_classes_serving(&self, resource: &str) -> BTreeSet<String> {
        let Some(names) = self.idx.classes_by_resource.get(resource) else {
            return BTreeSet::new();
        };
        names
            .iter()
            .filter(|n| self.class(n).is_some_and(|c| !is_deleting(&c.metadata)))
            .cloned()
            .collect()
    }

    /// D5: the DRA classes not being deleted whose DeviceClass is `dc`
    /// (classes are few: a pass over them).
    pub fn live_dra_classes_of(&self, dc: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.for_each_class(|c| {
            if c.spec.device_class_name.as_deref() == Some(dc) && !is_deleting(&c.metadata) {
                out.insert(c.metadata.name.clone().unwrap_or_default());
            }
        });
        out
    }

    /// The VMIs whose spec requests devices of `resource`.
    pub fn vmis_requesting(&self, resource: &str) -> Vec<String> {
        self.idx
            .vmis_by_device
            .get(resource)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The GPUQuotas of namespace `ns`, by name (Q1 checks them in this
    /// order, so the one a set is told about is the same on every run).
    pub fn quotas_in(&self, ns: &str) -> Vec<Arc<GPUQuota>> {
        let Some(keys) = self.idx.quotas_by_namespace.get(ns) else {
            return Vec::new();
        };
        keys.iter().filter_map(|k| self.quota(k)).collect()
    }

    /// Whether namespace `ns` has a GPUQuota (no copy: asked per allocation).
    pub fn has_quotas(&self, ns: &str) -> bool {
        self.idx
            .quotas_by_namespace
            .get(ns)
            .is_some_and(|s| !s.is_empty())
    }

    /// Keys of the GPUQuotas of namespace `ns`.
    pub fn quota_keys_in(&self, ns: &str) -> Vec<String> {
        self.idx
            .quotas_by_namespace
            .get(ns)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Keys of the GPUQuotas whose `spec.hard` names `class`.
    pub fn quotas_naming(&self, class: &str) -> Vec<String> {
        self.idx
            .quotas_by_class
            .get(class)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// GPUs namespace `ns`'s claims of `class` hold or owe (phases Bound,
    /// Attached, Lost), or of every class when `class` is None: what a
    /// GPUQuota's status shows (Q2).
    pub fn namespace_usage(&self, ns: &str, class: Option<&str>) -> u64 {
        let idx = &self.idx;
        per_namespace(&idx.namespace_usage, &idx.namespace_usage_total, ns, class)
    }

    /// GPUs recorded in namespace `ns` for `class`, or for every class
    /// when `class` is None: what Q1 counts (as budgets, from records).
    pub fn allocated_in_namespace(&self, ns: &str, class: Option<&str>) -> u64 {
        let idx = &self.idx;
        per_namespace(
            &idx.allocated_by_namespace,
            &idx.allocated_by_namespace_total,
            ns,
            class,
        )
    }

    /// Claim keys whose attachment or VMI owner names the VMI `ns/name`.
    pub fn claims_of_vmi(&self, vmi_key: &str) -> Vec<String> {
        self.idx
            .claims_by_vmi
            .get(vmi_key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The nodes tainted for evacuation (E2), by name.
    pub fn evacuating_nodes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .idx
            .evacuating
            .iter()
            .map(|e| e.key().clone())
            .collect();
        v.sort();
        v
    }

    /// Whether any node is being evacuated, or keeps a restart under way:
    /// E2 has work to look at.
    pub fn evacuation_has_work(&self) -> bool {
        !self.idx.evacuating.is_empty() || !self.idx.restarting.is_empty()
    }

    /// Nodes that keep E2's finalizer and no restart mark: the finalizer
    /// outlived its marks (a mark removed by hand, a write that stopped
    /// half way), and holds a deleted node for nothing.
    pub fn evacuation_finalizer_without_marks(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .idx
            .restarting
            .iter()
            .filter(|e| {
                self.node(e.key())
                    .is_some_and(|f| f.evacuation_finalizer && f.restarts.is_empty())
            })
            .map(|e| e.key().clone())
            .collect();
        nodes.sort();
        nodes
    }

    /// E2's restarts under way as the nodes keep them: (node, uid of the
    /// VMI deleted, the mark; None where its value cannot be read).
    pub fn restart_marks(&self) -> Vec<(String, String, Option<RestartMark>)> {
        let mut nodes: Vec<String> = self
            .idx
            .restarting
            .iter()
            .map(|e| e.key().clone())
            .collect();
        nodes.sort();
        let mut out = Vec::new();
        for n in nodes {
            let Some(f) = self.node(&n) else { continue };
            for (uid, m) in &f.restarts {
                out.push((n.clone(), uid.clone(), m.clone()));
            }
        }
        out
    }

    /// Claim keys whose status.nodeName is `node`.
    pub fn claims_on_node(&self, node: &str) -> Vec<String> {
        self.idx
            .claims_by_node
            .get(node)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Claim keys of a class.
    pub fn claims_of_class(&self, class: &str) -> Vec<String> {
        self.idx
            .claims_by_class
            .get(class)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// What a class's claims hold, kept as claims change.
    pub fn class_usage(&self, class: &str) -> ClassUsage {
        self.idx
            .class_usage
            .get(class)
            .map(|u| *u)
            .unwrap_or_default()
    }

    /// GPUs recorded on `node` for `resource`.
    pub fn allocated_on(&self, node: &str, resource: &str) -> u64 {
        self.idx
            .allocated
            .get(&(node.to_string(), resource.to_string()))
            .map(|n| *n)
            .unwrap_or(0)
    }

    /// GPUs recorded for a class, cluster-wide.
    pub fn allocated_to_class(&self, class: &str) -> u64 {
        self.idx
            .allocated_by_class
            .get(class)
            .map(|n| *n)
            .unwrap_or(0)
    }

    /// The launcher pods of the VMI `ns/name`.
    pub fn launchers(&self, vmi_key: &str) -> Vec<Arc<LauncherPod>> {
        let Some(names) = self.idx.launchers_by_vmi.get(vmi_key) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|k| self.pods.get(k).map(|p| p.clone()))
            .collect()
    }
}
