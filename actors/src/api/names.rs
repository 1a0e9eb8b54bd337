//! Names that are part of the API: group, finalizers, labels, annotations,
//! condition types and reasons.

pub const CLASS_FINALIZER: &str = "gpu.cozystack.io/class-protection";
pub const CLAIM_FINALIZER: &str = "gpu.cozystack.io/claim-protection";
pub const TEMPLATE_LABEL: &str = "gpu.cozystack.io/template";
pub const CLAIMS_ANNOTATION: &str = "gpu.cozystack.io/claims";
pub const CLASS_ANNOTATION: &str = "gpu.cozystack.io/class";
pub const COUNT_ANNOTATION: &str = "gpu.cozystack.io/count";
pub const SCHEDULING_GATE: &str = "gpu.cozystack.io/claims";
pub const DEVICES_LOST_TAINT: &str = "gpu.cozystack.io/devices-lost";
/// E2: a node whose GPU VMs are to move elsewhere (any effect).
pub const EVACUATE_TAINT: &str = "gpu.cozystack.io/evacuate";
/// E2: a restart under way, kept on the node it moves a VM off, one
/// annotation per restart: this prefix and the uid of the VMI deleted
/// (a uid fits a qualified name's 63 characters), valued
/// `{"vm":"<namespace>/<name>","at":"<RFC 3339>"}` (`RestartMark`).
pub const RESTART_MARK_PREFIX: &str = "evacuation.gpu.cozystack.io/";
/// E2: kept on a node while it keeps a restart mark, written and removed
/// with the marks: a node deleted mid-evacuation stays (being deleted)
/// until its restarts are over, so that they still count (I10).
pub const EVACUATION_FINALIZER: &str = "gpu.cozystack.io/evacuation";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
pub const LAUNCHER_LABEL: &str = "kubevirt.io";
pub const LAUNCHER_LABEL_VALUE: &str = "virt-launcher";
pub const VMI_API_VERSION: &str = "kubevirt.io/v1";
pub const VMI_KIND: &str = "VirtualMachineInstance";

pub const CONDITION_WAITING: &str = "Waiting";
/// O2: the claim's set is at the head of the claim's class; its
/// lastTransitionTime is since when (a controller that restarts counts
/// from it).
pub const CONDITION_QUEUE_HEAD: &str = "QueueHead";
/// D1: a DRA class's selector does not compile, or errors on a device.
pub const CONDITION_SELECTOR_INVALID: &str = "SelectorInvalid";
/// D1: a DRA class serves nothing: the cluster serves no DRA, or the
/// class's DeviceClass does not exist.
pub const CONDITION_DRA_UNAVAILABLE: &str = "DRAUnavailable";
pub const CONDITION_LOST: &str = "Lost";
/// A claim that holds or owes GPUs but has no allocation record.
pub const CONDITION_ALLOCATION_MISSING: &str = "AllocationMissing";
/// A GPUQuota that names a GPUClass that does not exist.
pub const CONDITION_CLASS_MISSING: &str = "ClassMissing";
/// D7: the taint of the DeviceTaintRules that close the pools gpu-claims
/// allocates in to kube-scheduler (effect NoSchedule). D2 ignores it.
pub const MANAGED_TAINT: &str = "gpu.cozystack.io/managed";
/// D7: how gpu-claims knows its DeviceTaintRules, whatever their names.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "gpu-claims";
/// D7: on every DRA class, whether the pools of its devices are closed to
/// kube-scheduler (False, with why, where they cannot be).
pub const CONDITION_EXCLUSIVE_DEVICES: &str = "ExclusiveDevices";
/// G2: on a class whose resource another live class serves too.
pub const CONDITION_SHARED_RESOURCE: &str = "SharedResource";

/// D4: our finalizer on a backing claim. Kubernetes' own
/// (`resource.kubernetes.io/delete-protection`) is reserved to it, and the
/// resourceclaim controller deallocates a claim that carries it once no
/// pod reserves it, which a stopped VM's claim must not be. This one keeps
/// a backing claim, and its devices, from going while a pod holds it,
/// whoever deletes it (a foreground cascade from its GPUClaim, a user):
/// it comes off once nothing reserves the claim.
pub const BACKING_FINALIZER: &str = "gpu.cozystack.io/backing-claim-protection";

/// D4: the uid of the GPUClaim a backing claim was made for. An orphaning
/// delete of the GPUClaim (`--cascade=orphan`) strips the owner
/// reference; this still says whose the claim is, so that L8 deletes it.
pub const BACKING_OWNER_ANNOTATION: &str = "gpu.cozystack.io/claim-uid";
