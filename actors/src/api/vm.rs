//! The slice of a KubeVirt VirtualMachine that gpu-claims reads: whether
//! its VMI, deleted by someone else, comes back. E2 restarts a VM
//! elsewhere by deleting its VMI, which only a VM whose runStrategy starts
//! a missing VMI answers with a new one (KubeVirt's `syncRunStrategy`):
//! Always and Once do; RerunOnFailure restarts only a VMI that failed,
//! Manual only on a start request, Halted never. Read live, never written.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct VirtualMachine {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: VirtualMachineSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<String>,
    /// The older field: true is Always, false or absent Halted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
}

impl VirtualMachine {
    /// The runStrategy in force, as KubeVirt resolves it.
    pub fn run_strategy(&self) -> &str {
        match (&self.spec.run_strategy, self.spec.running) {
            (Some(s), _) => s,
            (None, Some(true)) => "Always",
            (None, _) => "Halted",
        }
    }

    /// Why its VMI, deleted, would not come back; None when it would.
    pub fn would_not_restart(&self) -> Option<String> {
        if self.metadata.deletion_timestamp.is_some() {
            return Some("its VirtualMachine is being deleted".into());
        }
        match self.run_strategy() {
            "Always" | "Once" => None,
            s => Some(format!(
                "its VirtualMachine's runStrategy is {s}, which does not start a deleted VMI again"
            )),
        }
    }
}

kubevirt_resource!(VirtualMachine, "VirtualMachine", "virtualmachines");

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(run_strategy: Option<&str>, running: Option<bool>) -> VirtualMachine {
        VirtualMachine {
            metadata: ObjectMeta::default(),
            spec: VirtualMachineSpec {
                run_strategy: run_strategy.map(str::to_string),
                running,
            },
        }
    }

    /// E2: which VMs start a deleted VMI again, as KubeVirt's
    /// `syncRunStrategy` does.
    #[test]
    fn e2_only_always_and_once_start_a_deleted_vmi_again() {
        for (strategy, running, comes_back) in [
            (Some("Always"), None, true),
            (Some("Once"), None, true),
            (Some("RerunOnFailure"), None, false),
            (Some("Manual"), None, false),
            (Some("Halted"), None, false),
            (None, Some(true), true),
            (None, Some(false), false),
            (None, None, false),
            // runStrategy wins over the older field.
            (Some("Manual"), Some(true), false),
        ] {
            let v = vm(strategy, running);
            assert_eq!(
                v.would_not_restart().is_none(),
                comes_back,
                "{strategy:?} {running:?}"
            );
        }
        let mut deleting = vm(Some("Always"), None);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(
            deleting.would_not_restart().as_deref(),
            Some("its VirtualMachine is being deleted")
        );
    }
}
