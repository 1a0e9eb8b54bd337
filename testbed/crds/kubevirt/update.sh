#!/bin/sh
# Regenerates the KubeVirt schemas the stand-in's CRDs carry from a
# kubevirt/kubevirt checkout: ./update.sh ~/src/kubevirt
# Each is CRDsValidation["<singular>"] of validations_generated.go, the
# schema virt-operator puts on every served version of the CRD.
set -eu
src="${1:?usage: update.sh KUBEVIRT_CHECKOUT}"
go="$src/pkg/virt-operator/resource/generate/components/validations_generated.go"
rev=$(git -C "$src" rev-parse HEAD)
day=$(git -C "$src" log -1 --format=%cs HEAD)
here=$(dirname "$0")
for n in virtualmachine virtualmachineinstance; do
  {
    echo "# KubeVirt's published openAPIV3Schema for the $n CRD, as virt-operator"
    echo "# installs it: CRDsValidation[\"$n\"] of kubevirt/kubevirt"
    echo "# pkg/virt-operator/resource/generate/components/validations_generated.go"
    echo "# at $rev ($day). Not edited:"
    echo "# ./update.sh regenerates it from a kubevirt checkout."
    awk -v key="	\"$n\": \`openAPIV3Schema:" '
      index($0, key) == 1 { on = 1; print "openAPIV3Schema:"; next }
      on && /^`,$/ { exit }
      on { print }' "$go"
  } > "$here/$n.yaml"
done
