//! A watched object read from its JSON text straight into the controller's
//! typed form, leniently: an object the controller cannot read is told
//! with its name and why, and its list or event goes on.
//!
//! Why not `DynamicObject` first, then typed: that builds a JSON tree of
//! every object and then a second, typed copy of it. At a cold start over
//! 120,000 devices and 50,000 pods that was the controller's largest cost
//! beyond the watch's own, and it made each kind ask for its next page
//! later. Here the page's reader hands over each object's text (serde_json's
//! `RawValue` protocol); the typed form is read from it directly, and only
//! an object that does not read goes the slow way, which says by field
//! what is wrong (or reads it after all: a kind served at an older version).

use crate::kube_ports::typed;
use gpu_claims_actors::api::{DecodeError, from_text};
use gpu_claims_actors::ports::{Kind, Obj};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::core::{DynamicResourceScope, Resource};
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// An object of `Kind::ALL[K]` as its watch read it. `K` is the kind's
/// index because deserializing has no other way to know what to read.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "nearly every object reads; boxing it would add an allocation per object to a cold start"
)]
pub enum Watched<const K: usize> {
    Read(Obj),
    Unreadable {
        meta: ObjectMeta,
        /// `namespace/name`, or the name of a cluster-scoped object.
        name: String,
        error: DecodeError,
    },
}

impl<const K: usize> Watched<K> {
    pub const KIND: Kind = Kind::ALL[K];

    /// The object, or its name and why it cannot be read.
    pub fn into_result(self) -> Result<Obj, (String, DecodeError)> {
        match self {
            Watched::Read(obj) => Ok(obj),
            Watched::Unreadable { name, error, .. } => Err((name, error)),
        }
    }

    /// From the object's text: typed directly, or the slow way.
    fn from_text(text: &str) -> Result<Self, serde_json::Error> {
        match from_text(Self::KIND, text) {
            Ok(obj) => Ok(Watched::Read(obj)),
            Err(_) => Ok(Self::from_dynamic(serde_json::from_str(text)?)),
        }
    }

    /// The slow way: the object as a JSON tree, then typed (which names
    /// the field at fault).
    fn from_dynamic(o: DynamicObject) -> Self {
        let meta = o.metadata.clone();
        match typed(Self::KIND, o) {
            Ok(obj) => Watched::Read(obj),
            Err(error) => Watched::Unreadable {
                name: match &meta.namespace {
                    Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
                    None => meta.name.clone().unwrap_or_default(),
                },
                meta,
                error,
            },
        }
    }
}

impl<const K: usize> Resource for Watched<K> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Watched::Read(obj) => obj.meta(),
            Watched::Unreadable { meta, .. } => meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Watched::Read(obj) => obj.meta_mut(),
            Watched::Unreadable { meta, .. } => meta,
        }
    }
}

impl<'de, const K: usize> Deserialize<'de> for Watched<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Asked as RawValue asks: serde_json's readers answer with the
        // object's text; any other deserializer (serde's buffer of an event
        // whose `object` came before its `type`) with the object itself.
        d.deserialize_newtype_struct(raw_token(), WatchedVisitor::<K>)
    }
}

struct WatchedVisitor<const K: usize>;

impl<'de, const K: usize> Visitor<'de> for WatchedVisitor<K> {
    type Value = Watched<K>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {} object", Watched::<K>::KIND.name())
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(Watched::from_dynamic(DynamicObject::deserialize(d)?))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(first) = map.next_key_seed(Text)? else {
            let empty = serde_json::Value::Object(Default::default());
            return DynamicObject::deserialize(empty)
                .map(Watched::from_dynamic)
                .map_err(de::Error::custom);
        };
        let token = raw_token();
        if !token.is_empty() && first == token {
            let text = map.next_value_seed(Text)?;
            return Watched::from_text(&text).map_err(de::Error::custom);
        }
        // A deserializer that gave the object's own fields: gather them.
        let mut fields = serde_json::Map::new();
        fields.insert(first.into_owned(), map.next_value()?);
        while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
            fields.insert(k, v);
        }
        DynamicObject::deserialize(serde_json::Value::Object(fields))
            .map(Watched::from_dynamic)
            .map_err(de::Error::custom)
    }
}

/// A string, borrowed from the input when the reader can lend it (the
/// object's text, from kube's readers, is never copied).
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(TextVisitor(PhantomData))
    }
}

struct TextVisitor<'de>(PhantomData<&'de ()>);

impl<'de> Visitor<'de> for TextVisitor<'de> {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The name under which serde_json's readers hand over a value's text
/// (private to serde_json): learnt from `RawValue` itself, which asks for
/// its text by it, rather than copied, so a new serde_json that renames it
/// costs speed (every object the slow way), never correctness.
fn raw_token() -> &'static str {
    static TOKEN: OnceLock<&'static str> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let mut ask = NameOfNewtype(None);
        let _ = Box::<RawValue>::deserialize(&mut ask);
        ask.0.unwrap_or("")
    })
}

/// A deserializer that only notes the name a newtype struct asks it for.
struct NameOfNewtype(Option<&'static str>);

impl<'de> Deserializer<'de> for &mut NameOfNewtype {
    type Error = de::value::Error;

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(name);
        Err(de::Error::custom("noted"))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a newtype's name is asked"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests;
