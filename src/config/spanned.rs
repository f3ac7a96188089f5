//! A value of a config file with where it is written: serde-saphyr's
//! `Spanned`, read from YAML as it is, and written for the parse cache
//! (docs/design.md#parse-cache) with its positions, which serde-saphyr's own
//! `Serialize` leaves out. What is written is the map serde-saphyr's
//! `Deserialize` reads positions from, so an entry read back from the cache
//! holds the same lines and columns as the YAML parse (only line and column
//! are kept: nothing here uses the rest of a location).

use std::ops::Deref;

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_saphyr::Location;

/// The first key of the map serde-saphyr's `Spanned<T>` reads its value and
/// positions from (its value is ignored). A serde-saphyr that spells it
/// otherwise reads the map as the value itself, which fails for every
/// value type of the config files, so an entry written before is reparsed,
/// never read wrong; `tests::positions_survive_the_cache` fails first.
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
        serde_saphyr::Spanned::<T>::deserialize(deserializer).map(Spanned)
    }
}

impl<T: Serialize> Serialize for Spanned<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry(SPANNED_MARKER, &())?;
        map.serialize_entry("value", &self.0.value)?;
        map.serialize_entry("referenced", &At(&self.0.referenced))?;
        map.serialize_entry("defined", &At(&self.0.defined))?;
        map.end()
    }
}

/// A location as serde-saphyr's `Location` reads it back: line and column.
struct At<'a>(&'a Location);

impl Serialize for At<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("line", &self.0.line())?;
        map.serialize_entry("column", &self.0.column())?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct Doc {
        name: Spanned<String>,
        list: Vec<Spanned<u32>>,
        map: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    }

    fn positions(doc: &Doc) -> Vec<(u64, u64, u64, u64)> {
        let at = |r: &Location, d: &Location| (r.line(), r.column(), d.line(), d.column());
        let mut out = vec![at(&doc.name.referenced, &doc.name.defined)];
        out.extend(doc.list.iter().map(|s| at(&s.referenced, &s.defined)));
        out.extend(doc.map.iter().map(|s| at(&s.referenced, &s.defined)));
        out
    }

    #[test]
    fn positions_survive_the_cache() {
        let yaml = "name: web\nlist:\n  - 1\n  - 7\nmap:\n  k: v\n";
        let parsed: Doc = serde_saphyr::from_str(yaml).unwrap();
        let json = serde_json::to_vec(&parsed).unwrap();
        let back: Doc = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.name.value, "web");
        assert_eq!(
            back.list.iter().map(|s| s.value).collect::<Vec<_>>(),
            [1, 7]
        );
        assert_eq!(positions(&back), positions(&parsed));
        assert_eq!(positions(&parsed)[0], (1, 7, 1, 7));
        assert_eq!(positions(&parsed)[2].0, 4);
    }
}
