//! JSON documents as Slurm 22.05's `--json` front-ends print them: a value tree whose
//! objects keep their keys in first-insertion order (Slurm's `data_t` dictionaries), a
//! `/`-path setter for the openapi/dbv0.0.38 parser tables (`"time/start"` creates or
//! reuses the `time` object, cf. src/plugins/openapi/dbv0.0.38/parse.c), the `meta`
//! block, and the serializer's text style (serializer/json over json-c: two-space
//! indent, `"key": value`, `/` escaped as `\/`, empty lists as `[` newline `]`, and no
//! newline after the closing brace; see `../shared/golden/sinfo.txt`).
//!
//! Invariant: a key appears at most once in an object ([`J::set`] replaces in place).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::io;

/// One JSON value with ordered objects.
#[derive(Debug, Clone, PartialEq)]
pub enum J {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Arr(Vec<J>),
    /// Keys in insertion order.
    Obj(Vec<(String, J)>),
}

impl J {
    /// An empty object.
    pub fn obj() -> J {
        J::Obj(Vec::new())
    }

    /// Sets `path` (`a/b/c`: nested objects, created in first-use order) to `v`. A
    /// key that exists keeps its place and gets the new value. Setting through a
    /// non-object turns it into an object (never happens with Slurm's tables).
    pub fn set(&mut self, path: &str, v: impl Into<J>) {
        let mut cur = self;
        let mut parts = path.split('/').peekable();
        while let Some(k) = parts.next() {
            if !matches!(cur, J::Obj(_)) {
                *cur = J::obj();
            }
            let J::Obj(fields) = cur else { unreachable!() };
            let pos = match fields.iter().position(|(n, _)| n == k) {
                Some(p) => p,
                None => {
                    fields.push((k.to_string(), J::Null));
                    fields.len() - 1
                }
            };
            if parts.peek().is_none() {
                fields[pos].1 = v.into();
                return;
            }
            cur = &mut fields[pos].1;
        }
    }

    /// Builder form of [`J::set`].
    pub fn with(mut self, path: &str, v: impl Into<J>) -> J {
        self.set(path, v);
        self
    }

    /// The value at `path`, if any (tests and callers that inspect a built tree).
    pub fn get(&self, path: &str) -> Option<&J> {
        let mut cur = self;
        for k in path.split('/') {
            let J::Obj(fields) = cur else { return None };
            cur = &fields.iter().find(|(n, _)| n == k)?.1;
        }
        Some(cur)
    }
}

impl From<&str> for J {
    fn from(s: &str) -> J {
        J::Str(s.to_string())
    }
}
impl From<String> for J {
    fn from(s: String) -> J {
        J::Str(s)
    }
}
impl From<bool> for J {
    fn from(b: bool) -> J {
        J::Bool(b)
    }
}
impl From<f64> for J {
    fn from(f: f64) -> J {
        J::Float(f)
    }
}
impl From<Vec<J>> for J {
    fn from(v: Vec<J>) -> J {
        J::Arr(v)
    }
}
impl<T: Into<J>> From<Option<T>> for J {
    fn from(v: Option<T>) -> J {
        v.map_or(J::Null, Into::into)
    }
}
macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for J {
            fn from(n: $t) -> J {
                J::Int(i64::try_from(n).unwrap_or(i64::MAX))
            }
        }
    )*};
}
from_int!(i32, i64, u16, u32, u64, usize);

impl From<serde_json::Value> for J {
    /// Converts a serde value (its objects come out in serde_json's key order).
    fn from(v: serde_json::Value) -> J {
        use serde_json::Value as V;
        match v {
            V::Null => J::Null,
            V::Bool(b) => J::Bool(b),
            V::Number(n) => match n.as_i64() {
                Some(i) => J::Int(i),
                None => J::Float(n.as_f64().unwrap_or(0.0)),
            },
            V::String(s) => J::Str(s),
            V::Array(a) => J::Arr(a.into_iter().map(J::from).collect()),
            V::Object(m) => J::Obj(m.into_iter().map(|(k, v)| (k, J::from(v))).collect()),
        }
    }
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Null => s.serialize_unit(),
            J::Bool(b) => s.serialize_bool(*b),
            J::Int(i) => s.serialize_i64(*i),
            J::Float(f) => s.serialize_f64(*f),
            J::Str(t) => s.serialize_str(t),
            J::Arr(a) => {
                let mut q = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    q.serialize_element(v)?;
                }
                q.end()
            }
            J::Obj(fields) => {
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

/// The `meta` block of a document: the plugin that dumped it (`openapi/v0.0.38` or
/// `openapi/dbv0.0.38`, with its display name) and the Slurm version sluice emulates
/// (`22.05.8` → major 22, micro 8, minor 5, in Slurm's key order).
pub fn meta(plugin: &str, plugin_name: &str, slurm_version: &str) -> J {
    let mut parts = slurm_version
        .split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor, micro) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    J::obj()
        .with("plugin/type", plugin)
        .with("plugin/name", plugin_name)
        .with("Slurm/version/major", major)
        .with("Slurm/version/micro", micro)
        .with("Slurm/version/minor", minor)
        .with("Slurm/release", slurm_version)
}

/// The v0.0.38 `meta` block (squeue, sinfo, scontrol, sdiag).
pub fn meta_v38(slurm_version: &str) -> J {
    meta("openapi/v0.0.38", "Slurm OpenAPI v0.0.38", slurm_version)
}

/// The dbv0.0.38 `meta` block (sacct).
pub fn meta_db38(slurm_version: &str) -> J {
    meta(
        "openapi/dbv0.0.38",
        "Slurm OpenAPI DB v0.0.38",
        slurm_version,
    )
}

/// A whole response: `meta`, an empty `errors` list, then `key` holding `items`.
pub fn document(meta: J, key: &str, items: Vec<J>) -> J {
    J::Obj(vec![
        ("meta".into(), meta),
        ("errors".into(), J::Arr(Vec::new())),
        (key.into(), J::Arr(items)),
    ])
}

/// serde_json formatter with Slurm's layout.
struct SlurmFormatter {
    level: usize,
}

impl SlurmFormatter {
    fn indent<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
        for _ in 0..self.level {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl serde_json::ser::Formatter for SlurmFormatter {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level += 1;
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level -= 1;
        w.write_all(b"\n")?;
        self.indent(w)?;
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(w)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level += 1;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level -= 1;
        w.write_all(b"\n")?;
        self.indent(w)?;
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(w)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // json-c escapes the solidus; the rest is ordinary JSON escaping.
        let mut rest = fragment;
        while let Some(i) = rest.find('/') {
            w.write_all(&rest.as_bytes()[..i])?;
            w.write_all(b"\\/")?;
            rest = &rest[i + 1..];
        }
        w.write_all(rest.as_bytes())
    }
}

/// `doc` as Slurm prints it (no final newline).
pub fn to_text(doc: &J) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, SlurmFormatter { level: 0 });
    // Writing into a Vec cannot fail and J has only string keys.
    if doc.serialize(&mut ser).is_err() {
        return "{}".into();
    }
    String::from_utf8(buf).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_nest_in_first_insertion_order() {
        let mut j = J::obj();
        j.set("account", "research");
        j.set("comment/administrator", J::Null);
        j.set("time/elapsed", 0u32);
        j.set("comment/job", J::Null);
        j.set("time/start", 5u32);
        j.set("account", "other");
        let keys: Vec<&str> = match &j {
            J::Obj(f) => f.iter().map(|(k, _)| k.as_str()).collect(),
            _ => vec![],
        };
        assert_eq!(keys, vec!["account", "comment", "time"]);
        assert_eq!(j.get("time/start"), Some(&J::Int(5)));
        assert_eq!(j.get("account"), Some(&J::from("other")));
        let t = serde_json::to_string(&j).unwrap();
        assert_eq!(
            t,
            r#"{"account":"other","comment":{"administrator":null,"job":null},"time":{"elapsed":0,"start":5}}"#
        );
    }

    #[test]
    fn text_style_matches_the_golden_sinfo_document() {
        let doc = document(
            meta_v38("22.05.8"),
            "nodes",
            vec![
                J::obj()
                    .with("gres_drained", "N/A")
                    .with("state_flags", J::Arr(vec![]))
                    .with("tres_weighted", 27.0),
            ],
        );
        let want = r#"{
  "meta": {
    "plugin": {
      "type": "openapi\/v0.0.38",
      "name": "Slurm OpenAPI v0.0.38"
    },
    "Slurm": {
      "version": {
        "major": 22,
        "micro": 8,
        "minor": 5
      },
      "release": "22.05.8"
    }
  },
  "errors": [
  ],
  "nodes": [
    {
      "gres_drained": "N\/A",
      "state_flags": [
      ],
      "tres_weighted": 27.0
    }
  ]
}"#;
        assert_eq!(to_text(&doc), want);
        // And it is JSON.
        let v: serde_json::Value = serde_json::from_str(want).unwrap();
        assert_eq!(v["nodes"][0]["gres_drained"], "N/A");
    }
}
