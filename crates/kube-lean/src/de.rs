//! The serde adapters behind [`crate::Lean`]: a deserializer wrapper that lets the wrapped
//! type read an object as usual, except that the value of `metadata.managedFields` is skipped
//! by the parser (as `IgnoredAny`: no allocation) and the key never reaches the type.
//!
//! Only two levels are looked at: the object's own keys (to find `metadata`) and the keys of
//! `metadata` (to drop `managedFields`). Everything else — `spec`, `status`, `data`, the
//! values inside `metadata` — is handed to the wrapped type's own deserializer untouched, so a
//! ConfigMap key or an annotation named `managedFields` stays.
//!
//! Written by hand because no maintained crate filters a key at a given depth during
//! deserialization (serde_ignored and serde_path_to_error wrap the same traits, to report
//! paths rather than to skip them).

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Visitor,
    value::{BorrowedStrDeserializer, StringDeserializer},
};

/// Where a wrapper stands in the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// The object itself: its `metadata` is looked into.
    Object,
    /// The object's `metadata`: its `managedFields` is skipped.
    Metadata,
}

/// A deserializer standing at `level` of the object.
pub(crate) struct At<D> {
    pub(crate) inner: D,
    pub(crate) level: Level,
}

/// A visitor standing at `level`: maps it is given are filtered.
struct Wrap<V> {
    inner: V,
    level: Level,
}

/// A seed whose deserializer is wrapped at `level` (the value of an object's `metadata`, or
/// the content of an `Option`/newtype around an object).
struct Descend<S> {
    seed: S,
    level: Level,
}

/// The entries of a map at `level`.
struct Entries<A> {
    inner: A,
    level: Level,
    /// The key just given out was the object's `metadata`.
    metadata_next: bool,
}

/// A map key, borrowed from the input when the deserializer allows it.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key::Owned(v))
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                std::str::from_utf8(v)
                    .map(Key::Borrowed)
                    .map_err(|_| E::invalid_value(de::Unexpected::Bytes(v), &self))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
                std::str::from_utf8(v)
                    .map(|s| Key::Owned(s.to_owned()))
                    .map_err(|_| E::invalid_value(de::Unexpected::Bytes(v), &self))
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Entries<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match self.level {
                Level::Metadata if key.as_str() == "managedFields" => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                Level::Object => self.metadata_next = key.as_str() == "metadata",
                Level::Metadata => {}
            }
            return match key {
                Key::Borrowed(s) => seed.deserialize(BorrowedStrDeserializer::<A::Error>::new(s)),
                Key::Owned(s) => seed.deserialize(StringDeserializer::<A::Error>::new(s)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(Descend {
                seed,
                level: Level::Metadata,
            })
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Descend<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(At {
            inner: d,
            level: self.level,
        })
    }
}

/// Visitor methods passed through unchanged (scalars: nothing to filter in them).
macro_rules! pass_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    pass_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_some(At {
            inner: d,
            level: self.level,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.inner.visit_newtype_struct(At {
            inner: d,
            level: self.level,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(Entries {
            inner: map,
            level: self.level,
            metadata_next: false,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

/// Deserializer methods, forwarded with their arguments and the visitor wrapped.
macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let level = self.level;
            self.inner.$method($($arg,)* Wrap { inner: visitor, level })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for At<D> {
    type Error = D::Error;

    forward!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_seq(),
        deserialize_map(),
        deserialize_identifier(),
        deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    );

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}
