#!/usr/bin/env python3
"""Vendors Kubernetes' protobuf descriptions of the kinds the server serves.

    proto/vendor.py K8S_PB API APIMACHINERY APIEXTENSIONS [TAG]

K8S_PB is a checkout of github.com/kube-rs/k8s-pb (its protos, with the
packages shortened from `k8s.io.api.core.v1` to `api.core.v1`); the other
three are checkouts of k8s.io/api, k8s.io/apimachinery and
k8s.io/apiextensions-apiserver, read at TAG (default v0.36.0, the release
k8s-pb's protos are from). It writes, under proto/:

- each `generated.proto` without its line comments (the licence header
  stays), which build.rs compiles into a descriptor set;
- `renamed.txt`: the fields whose JSON name is not their protobuf name;
- `zero_kept.txt`: the fields whose zero value is kept when a protobuf
  body is turned into JSON. Go's protobuf encoding writes every
  non-pointer field, so a decoded message holds `""`, `0` and `false` for
  fields a client never set; Go's JSON encoding then leaves out those with
  `omitempty`. A field keeps its zero if its Go type is a pointer
  (`replicas: 0` is not "unset") or its json tag has no `omitempty`.
"""

import pathlib
import re
import subprocess
import sys

PROTOS = [
    "api/core/v1", "api/apps/v1", "api/batch/v1", "api/policy/v1", "api/policy/v1beta1",
    "api/rbac/v1",
    "api/coordination/v1", "api/events/v1", "api/admissionregistration/v1",
    "api/networking/v1", "api/scheduling/v1", "api/authorization/v1",
    "api/authentication/v1", "api/certificates/v1", "api/discovery/v1",
    "apiextensions-apiserver/pkg/apis/apiextensions/v1",
    "apimachinery/pkg/api/resource", "apimachinery/pkg/apis/meta/v1",
    "apimachinery/pkg/runtime", "apimachinery/pkg/runtime/schema",
    "apimachinery/pkg/util/intstr",
]

STRUCT = re.compile(r"^type (\w+) struct \{$")
FIELD = re.compile(r'^\t(\w+)\s+(\S+)\s+`.*json:"([^",]*)([^"]*)"')


def show(repo, rev, path):
    out = subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"],
                         capture_output=True, text=True, check=True)
    return out.stdout


def strip(src):
    head, rest = src.split("*/", 1)
    lines = [l for l in rest.splitlines() if l.strip() and not l.strip().startswith("//")]
    return head + "*/\n\n" + "\n".join(lines) + "\n"


def fields(go_src, package):
    """Of one Go file's structs: (message, field) of every scalar field
    whose zero Go's JSON keeps, and (message, proto name, json name) of
    every field whose two names differ (`$ref`, `x-kubernetes-...`)."""
    kept, renamed, struct = [], [], None
    for line in go_src.splitlines():
        m = STRUCT.match(line)
        if m:
            struct = m.group(1)
            continue
        if line == "}":
            struct = None
            continue
        f = FIELD.match(line) if struct else None
        if not f or not f.group(3):
            continue
        go_type, name, opts = f.group(2), f.group(3), f.group(4)
        proto = re.search(r'protobuf:"[^"]*name=(\w+)', line)
        if proto and proto.group(1) != name:
            renamed.append(f"{package}.{struct} {proto.group(1)} {name}")
        if go_type.startswith(("[", "map[")):
            continue
        if go_type.startswith("*") or "omitempty" not in opts:
            kept.append(f"{package}.{struct} {name}")
    return kept, renamed


def main():
    k8s_pb, api, machinery, extensions = sys.argv[1:5]
    tag = sys.argv[5] if len(sys.argv) > 5 else "v0.36.0"
    here = pathlib.Path(__file__).parent
    kept, renamed = [], []
    for p in PROTOS:
        src = show(k8s_pb, "HEAD", f"k8s-pb-codegen/protos/{p}/generated.proto")
        out = here / p / "generated.proto"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(strip(src))
        package = re.search(r"^package ([\w.]+);", src, re.M).group(1)
        if p.startswith("api/"):
            repo, go_dir = api, p[len("api/"):]
        elif p.startswith("apimachinery/"):
            repo, go_dir = machinery, p[len("apimachinery/"):]
        else:
            repo, go_dir = extensions, p[len("apiextensions-apiserver/"):]
        for go_file in ("types.go", "types_jsonschema.go"):
            try:
                k, r = fields(show(repo, tag, f"{go_dir}/{go_file}"), package)
                kept, renamed = kept + k, renamed + r
            except subprocess.CalledProcessError:
                pass
    (here / "zero_kept.txt").write_text(
        "# Written by vendor.py: message field, for fields whose zero value JSON keeps.\n"
        + "\n".join(sorted(set(kept))) + "\n")
    (here / "renamed.txt").write_text(
        "# Written by vendor.py: message, protobuf field name, JSON field name.\n"
        + "\n".join(sorted(set(renamed))) + "\n")


if __name__ == "__main__":
    main()
