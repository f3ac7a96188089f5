//! A value of a config file with where it is written: serde-saphyr's
//! `Spanned`, read from YAML as it is, and written for the parse cache
//! (docs/design.md#parse-cache) with its positions, which serde-saphyr's own
//! `Serialize` leaves out. The cache keeps it compact, as a sequence
//! `[value, line, column]`, or `[value, line, column, line, column]` when
//! where it is used (an alias) is not where it is defined: a warm `plan`
//! decodes one per name, need, chart and hook, and the map serde-saphyr's
//! own representation spells out took half of the pack's decoding. Only
//! line and column are kept: nothing here uses the rest of a location.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use serde::de::value::MapDeserializer;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_saphyr::Location;

/// The newtype name serde-saphyr's deserializer answers with a value's
/// positions: the map `{MARKER: _, value, referenced, defined}`.
const SPANNED_NEWTYPE: &str = "__yaml_spanned";
/// The first key of that map. A serde-saphyr that changes either reads
/// every `Spanned` of the config files without positions or fails;
/// `tests::yaml_positions_are_read` fails first.
const SPANNED_MARKER: &str = "__serde_saphyr_private_spanned";

#[derive(Debug)]
pub struct Spanned<T>(serde_saphyr::Spanned<T>);

impl<T> Spanned<T> {
    /// The value, without its positions.
    pub fn into_value(self) -> T {
        self.0.value
    }
}

impl<T> Deref for Spanned<T> {
    type Target = serde_saphyr::Spanned<T>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct(SPANNED_NEWTYPE, Newtype(PhantomData))
    }
}

/// What `deserialize_newtype_struct` hands over: serde-saphyr's view of a
/// value with its positions, or the cache's sequence (serde_json hands the
/// deserializer itself).
struct Newtype<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Newtype<T> {
    type Value = Spanned<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value with its position")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Repr(PhantomData))
    }
}

struct Repr<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Repr<T> {
    type Value = Spanned<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value with its position")
    }

    /// serde-saphyr's map: the marker, then `value`, `referenced`, `defined`.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        match map.next_key::<String>()? {
            Some(key) if key == SPANNED_MARKER => map.next_value::<IgnoredAny>()?,
            _ => return Err(de::Error::custom("a value without its position")),
        };
        let (mut value, mut referenced, mut defined) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "value" => value = Some(map.next_value()?),
                "referenced" => referenced = Some(map.next_value()?),
                "defined" => defined = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let value = value.ok_or_else(|| de::Error::missing_field("value"))?;
        let referenced = referenced.ok_or_else(|| de::Error::missing_field("referenced"))?;
        let defined = defined.ok_or_else(|| de::Error::missing_field("defined"))?;
        Ok(Spanned(serde_saphyr::Spanned::new(
            value, referenced, defined,
        )))
    }

    /// The cache's `[value, line, column]` or `[value, line, column, line, column]`.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing = || de::Error::custom("a cached value without its position");
        let value = seq.next_element()?.ok_or_else(missing)?;
        let line: u64 = seq.next_element()?.ok_or_else(missing)?;
        let column: u64 = seq.next_element()?.ok_or_else(missing)?;
        let referenced = location::<A::Error>(line, column)?;
        let defined = match seq.next_element::<u64>()? {
            None => referenced,
            Some(line) => {
                let column: u64 = seq.next_element()?.ok_or_else(missing)?;
                location(line, column)?
            }
        };
        Ok(Spanned(serde_saphyr::Spanned::new(
            value, referenced, defined,
        )))
    }
}

/// A `Location` at `line` and `column`: serde-saphyr builds them only
/// through their `Deserialize`.
fn location<E: de::Error>(line: u64, column: u64) -> Result<Location, E> {
    Location::deserialize(MapDeserializer::new(
        [("line", line), ("column", column)].into_iter(),
    ))
}

impl<T: Serialize> Serialize for Spanned<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (r, d) = (&self.0.referenced, &self.0.defined);
        let same = (r.line(), r.column()) == (d.line(), d.column());
        let mut seq = serializer.serialize_tuple(if same { 3 } else { 5 })?;
        seq.serialize_element(&self.0.value)?;
        seq.serialize_element(&r.line())?;
        seq.serialize_element(&r.column())?;
        if !same {
            seq.serialize_element(&d.line())?;
            seq.serialize_element(&d.column())?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, Serialize)]
    struct Doc {
        name: Spanned<String>,
        list: Vec<Spanned<u32>>,
        map: Option<Spanned<BTreeMap<String, String>>>,
    }

    fn positions(doc: &Doc) -> Vec<(u64, u64, u64, u64)> {
        let at = |r: &Location, d: &Location| (r.line(), r.column(), d.line(), d.column());
        let mut out = vec![at(&doc.name.referenced, &doc.name.defined)];
        out.extend(doc.list.iter().map(|s| at(&s.referenced, &s.defined)));
        out.extend(doc.map.iter().map(|s| at(&s.referenced, &s.defined)));
        out
    }

    #[test]
    fn yaml_positions_are_read() {
        let parsed: Doc = serde_saphyr::from_str("name: web\nlist:\n  - 1\n  - 7\n").unwrap();
        assert_eq!(
            positions(&parsed),
            [(1, 7, 1, 7), (3, 5, 3, 5), (4, 5, 4, 5)]
        );
    }

    #[test]
    fn positions_survive_the_cache() {
        let yaml = "name: web\nlist:\n  - 1\n  - 7\nmap:\n  k: v\n";
        let parsed: Doc = serde_saphyr::from_str(yaml).unwrap();
        let json = serde_json::to_string(&parsed).unwrap();
        assert_eq!(
            json,
            r#"{"name":["web",1,7],"list":[[1,3,5],[7,4,5]],"map":[{"k":"v"},6,3]}"#
        );
        let back: Doc = serde_json::from_str(&json).unwrap();
        assert_eq!(back.name.value, "web");
        assert_eq!(
            back.list.iter().map(|s| s.value).collect::<Vec<_>>(),
            [1, 7]
        );
        assert_eq!(positions(&back), positions(&parsed));
    }

    #[test]
    fn an_alias_keeps_where_it_is_used_and_where_it_is_defined() {
        let yaml = "name: &n web\nlist: [1]\nmap:\n  k: *n\n";
        #[derive(Debug, Deserialize, Serialize)]
        struct Aliased {
            name: Spanned<String>,
            list: Vec<Spanned<u32>>,
            map: BTreeMap<String, Spanned<String>>,
        }
        let parsed: Aliased = serde_saphyr::from_str(yaml).unwrap();
        let k = &parsed.map["k"];
        assert_ne!(k.referenced.line(), k.defined.line());
        let back: Aliased = serde_json::from_str(&serde_json::to_string(&parsed).unwrap()).unwrap();
        let at = |s: &Spanned<String>| {
            (
                s.referenced.line(),
                s.referenced.column(),
                s.defined.line(),
                s.defined.column(),
            )
        };
        assert_eq!(at(&back.map["k"]), at(k));
        assert_eq!(back.map["k"].value, "web");
    }

    #[test]
    fn a_cached_value_without_its_position_is_an_error() {
        assert!(serde_json::from_str::<Spanned<String>>(r#"["web"]"#).is_err());
        assert!(serde_json::from_str::<Spanned<String>>(r#"["web",1,7,2]"#).is_err());
        assert!(serde_json::from_str::<Spanned<String>>(r#""web""#).is_err());
    }
}
