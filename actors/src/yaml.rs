//! YAML as Kubernetes users write it: YAML 1.2's core schema, where only
//! `true` and `false` are booleans. `y`, `n`, `yes`, `no`, `on` and `off`
//! are legal object names, label values and annotation values, and kubectl
//! reads them as strings; YAML 1.1's reading of them as booleans would
//! refuse a claim named `y` or turn a label `on` into `true`. The config,
//! snapshots and manifests gpu-claims reads go through here.

use serde::de::DeserializeOwned;

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
    }
}

/// One document.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// Every document of a multi-document text (a document may start on its
/// `---` line); empty ones are skipped.
pub fn documents<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, options())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// YAML 1.1's boolean words, as every kind of string Kubernetes has.
    #[test]
    fn yaml_1_1_words_are_strings_as_names_labels_and_annotations() {
        for word in ["y", "Y", "n", "N", "yes", "no", "on", "off", "On", "OFF"] {
            let text = format!(
                "metadata:\n  name: {word}\n  labels:\n    l: {word}\n  annotations:\n    a: {word}\n"
            );
            let v: Value = from_str(&text).unwrap();
            for path in [
                "/metadata/name",
                "/metadata/labels/l",
                "/metadata/annotations/a",
            ] {
                assert_eq!(
                    v.pointer(path),
                    Some(&Value::from(word)),
                    "{word} at {path}"
                );
            }
        }
        let v: Value = from_str("t: true\nf: false\n").unwrap();
        assert_eq!(v["t"], Value::Bool(true));
        assert_eq!(v["f"], Value::Bool(false));
    }

    #[test]
    fn a_document_may_start_on_its_separator_line() {
        let docs: Vec<Value> =
            documents("--- {kind: A}\n--- {kind: B}\n---\n# only a comment\n---\nkind: C\n")
                .unwrap();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["A", "B", "C"]);
    }
}
