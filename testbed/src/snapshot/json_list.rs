//! A JSON snapshot read as a stream: `kubectl get pods -A -o json` writes
//! one List document, and reading it as one tree held every pod of the
//! cluster at once (50,000 pods: 678 MB). Here a List's `items` are handed
//! on one at a time as they are parsed, and only the other keys of the
//! document (apiVersion, kind, metadata) are kept whole.
//!
//! kubectl writes `items` before `kind` (its keys are sorted), so whether
//! the document is a List is known only at its end: items handed on before
//! it turns out not to be one make it an error, and the caller drops what
//! it got (as on any error of a snapshot).

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// The document's keys other than `items`, and how many items it had
/// (None: no `items`).
pub(super) type Read = (Map<String, Value>, Option<usize>);

/// What `each` said of an item that stopped the stream, or the JSON's own
/// error.
pub(super) enum Stopped<E> {
    Item(E),
    Json(serde_json::Error),
}

/// Reads one JSON document from `reader`: each item of a top-level
/// `items` array to `each` as it is parsed; then the document's other
/// keys, and whether it had items (`Some(n)`: n items handed on).
pub(super) fn read<R: std::io::Read, E>(
    reader: R,
    each: &mut dyn FnMut(Value) -> Result<(), E>,
) -> Result<Read, Stopped<E>> {
    let mut stopped = None;
    let mut de = serde_json::Deserializer::from_reader(reader);
    let read = Document {
        each,
        stopped: &mut stopped,
    }
    .deserialize(&mut de)
    .and_then(|doc| de.end().map(|()| doc));
    match (read, stopped) {
        (_, Some(e)) => Err(Stopped::Item(e)),
        (Ok(doc), None) => Ok(doc),
        (Err(e), None) => Err(Stopped::Json(e)),
    }
}

struct Document<'a, E> {
    each: &'a mut dyn FnMut(Value) -> Result<(), E>,
    stopped: &'a mut Option<E>,
}

impl<'de, E> DeserializeSeed<'de> for Document<'_, E> {
    type Value = Read;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, E> Visitor<'de> for Document<'_, E> {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rest = Map::new();
        let mut items = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && items.is_none() {
                let seed = Items {
                    each: &mut *self.each,
                    stopped: &mut *self.stopped,
                };
                items = Some(map.next_value_seed(seed)?);
            } else {
                rest.insert(key, map.next_value()?);
            }
        }
        Ok((rest, items))
    }
}

/// A List's items, each handed on as soon as it is parsed.
struct Items<'a, E> {
    each: &'a mut dyn FnMut(Value) -> Result<(), E>,
    stopped: &'a mut Option<E>,
}

impl<'de, E> DeserializeSeed<'de> for Items<'_, E> {
    type Value = usize;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, E> Visitor<'de> for Items<'_, E> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<Er: de::Error>(self) -> Result<usize, Er> {
        Ok(0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut n = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            if let Err(e) = (self.each)(item) {
                *self.stopped = Some(e);
                return Err(de::Error::custom("stopped by an item"));
            }
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items_of(text: &str) -> Result<(Vec<Value>, Read), String> {
        let mut got = Vec::new();
        let mut each = |v: Value| -> Result<(), String> {
            if v == "stop" {
                return Err("stopped".into());
            }
            got.push(v);
            Ok(())
        };
        match read(text.as_bytes(), &mut each) {
            Ok(doc) => Ok((got, doc)),
            Err(Stopped::Item(e)) => Err(e),
            Err(Stopped::Json(e)) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_lists_items_are_handed_on_one_by_one_and_the_rest_kept() {
        let (items, (rest, n)) =
            items_of(r#"{"apiVersion":"v1","items":[{"a":1},{"b":2}],"kind":"List"}"#).unwrap();
        assert_eq!(
            items,
            [serde_json::json!({"a":1}), serde_json::json!({"b":2})]
        );
        assert_eq!(n, Some(2));
        assert_eq!(rest["kind"], "List");
        let (items, (rest, n)) = items_of(r#"{"kind":"Node","metadata":{"name":"a"}}"#).unwrap();
        assert!(items.is_empty() && n.is_none());
        assert_eq!(rest["metadata"]["name"], "a");
        let (_, (_, n)) = items_of(r#"{"kind":"List","items":null}"#).unwrap();
        assert_eq!(n, Some(0));
    }

    #[test]
    fn an_item_that_stops_it_and_bad_json_are_errors() {
        assert_eq!(
            items_of(r#"{"items":[1,"stop",2]}"#).unwrap_err(),
            "stopped"
        );
        assert!(items_of(r#"{"items":{"a":1}}"#).is_err());
        assert!(items_of(r#"{"items":[1]} {}"#).is_err(), "one document");
    }
}
