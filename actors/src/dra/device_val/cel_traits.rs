//! A lazy map as the CEL interpreter sees it: a value, an indexer that looks
//! a key up in place, and, for everything else, the map made whole once.

use super::*;
use cel::ExecutionError;
use cel::common::traits::{Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{MAP_TYPE, Type};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};

impl<M: LazyMap> Val for Lazy<M> {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self.map.whole())
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(self.map.whole())
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self.map.whole())
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self.map.whole())
    }

    // Any map, a view in place included: the same keys, equal values.
    fn equals(&self, other: &dyn Val) -> bool {
        let whole = self.map.whole();
        let (Some(size), Some(index)) = (other.as_sizer(), other.as_indexer()) else {
            return false;
        };
        other.get_type().kind() == cel::common::types::Kind::Map
            && *size.size().inner() == whole.len() as i64
            && whole
                .inner()
                .iter()
                .all(|(k, v)| index.get(k.inner()).is_ok_and(|o| v.equals(o.as_ref())))
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    // A built-in map, the whole one, when the selector wants it (`Lazy`).
    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        match self.builtin() {
            true => BuiltinRef::Map(self.map.whole()),
            false => BuiltinRef::Other,
        }
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        self.builtin()
            .then(|| Builtin::Map(self.map.whole().clone()))
    }
}

impl<M: LazyMap> Indexer for Lazy<M> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.map.get(key_str(idx)?)
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}
