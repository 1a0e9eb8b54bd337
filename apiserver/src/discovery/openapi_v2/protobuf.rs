//! OpenAPI v2 as gnostic's protobuf (`openapi.v2.Document`), encoded by
//! hand for the messages client-go reads (the field numbers are gnostic's
//! openapiv2/OpenAPIv2.proto): what client-go's `OpenAPISchema` reads,
//! for helm's and kubectl's validation.

use super::{WRITE_PARAMS, paths};
use crate::{Resource, Served};

/// The media type of the answer: what client-go asks for
/// (`...spec.v2@v1.0+protobuf`), spelled as kube-openapi answers it (an
/// `@` is no valid media type character, and Go's parser refuses it).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// A protobuf message under construction (proto3 wire format).
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(byte);
                return;
            }
            self.0.push(byte | 0x80);
        }
    }

    /// A length-delimited field (a string, bytes or a message).
    fn bytes(mut self, field: u64, b: &[u8]) -> Self {
        self.varint((field << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn text(self, field: u64, s: &str) -> Self {
        self.bytes(field, s.as_bytes())
    }

    fn msg(self, field: u64, m: Pb) -> Self {
        self.bytes(field, &m.0)
    }

    fn flag(mut self, field: u64, on: bool) -> Self {
        if on {
            self.varint(field << 3);
            self.varint(1);
        }
        self
    }
}

/// An operation's group, version and kind as the protobuf document
/// carries extensions: YAML.
fn gvk_yaml(r: &Resource) -> String {
    format!(
        "group: {:?}\nkind: {}\nversion: {}\n",
        r.group, r.kind, r.version
    )
}

/// The document as gnostic's `openapi.v2.Document`.
pub fn protobuf(served: &Served) -> Vec<u8> {
    let version = crate::discovery::version()["gitVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut paths_pb = Pb::default();
    for (path, r, ops) in paths(served) {
        let mut item = Pb::default();
        for o in ops {
            // Operation: parameters (8), responses (9), operation_id (5),
            // vendor_extension (13).
            let mut op = Pb::default().text(5, &format!("{}{}", o.action, r.kind));
            if o.writes {
                for p in WRITE_PARAMS {
                    // QueryParameterSubSchema: in (2), name (4), type (6), unique_items (20).
                    let q = Pb::default()
                        .text(2, "query")
                        .text(4, p)
                        .text(6, "string")
                        .flag(20, true);
                    // ParametersItem.parameter (1) → Parameter.non_body_parameter (2)
                    // → NonBodyParameter.query_parameter_sub_schema (3).
                    let param = Pb::default().msg(2, Pb::default().msg(3, q));
                    op = op.msg(8, Pb::default().msg(1, param));
                }
            }
            // Responses.response_code (1): NamedResponseValue{name, ResponseValue.response{description}}.
            let ok = Pb::default()
                .text(1, "200")
                .msg(2, Pb::default().msg(1, Pb::default().text(1, "OK")));
            op = op.msg(9, Pb::default().msg(1, ok));
            for (name, yaml) in [
                ("x-kubernetes-action", format!("{}\n", o.action)),
                ("x-kubernetes-group-version-kind", gvk_yaml(r)),
            ] {
                // NamedAny{name (1), value (2): Any{yaml (2)}}.
                let any = Pb::default().text(2, &yaml);
                op = op.msg(13, Pb::default().text(1, name).msg(2, any));
            }
            // PathItem: get (2), put (3), post (4), delete (5), patch (8).
            let field = match o.method {
                "get" => 2,
                "put" => 3,
                "post" => 4,
                "delete" => 5,
                _ => 8,
            };
            item = item.msg(field, op);
        }
        // Paths.path (2): NamedPathItem{name (1), value (2)}.
        paths_pb = paths_pb.msg(2, Pb::default().text(1, &path).msg(2, item));
    }
    Pb::default()
        .text(1, "2.0")
        .msg(2, Pb::default().text(1, "Kubernetes").text(2, &version))
        .msg(8, paths_pb)
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_are_protobufs_wire_format() {
        let mut p = Pb::default();
        p.varint(300);
        assert_eq!(p.0, [0xac, 0x02]);
        assert_eq!(Pb::default().text(1, "2.0").0, [0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(Pb::default().flag(20, true).0, [0xa0, 0x01, 1]);
    }

    #[test]
    fn the_document_names_every_path() {
        let served = crate::resources::served_for_tests();
        let doc = protobuf(&served);
        let path = b"/api/v1/namespaces/{namespace}/configmaps/{name}";
        assert!(doc.windows(path.len()).any(|w| w == path));
    }
}
