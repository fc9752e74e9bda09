//! Byte buffers on the wire as MessagePack `bin` (one byte per byte) instead of serde's
//! default array of integers. Use with `#[serde(with = "crate::proto::bytes")]`;
//! decoding also accepts an array of integers, so either form is read.

use serde::de::{Error, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;

/// Serialises `v` as a byte string.
pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(v)
}

/// Deserialises a byte string (or a sequence of small integers).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<Vec<u8>, E> {
            Ok(v.as_bytes().to_vec())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V)
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Chunk {
        #[serde(with = "super")]
        data: Vec<u8>,
    }

    #[derive(Serialize)]
    struct Plain {
        data: Vec<u8>,
    }

    #[test]
    fn bytes_are_compact_and_round_trip() {
        let c = Chunk {
            data: (0..=255).collect(),
        };
        let enc = crate::proto::codec::encode(&c).unwrap();
        assert!(enc.len() < 256 + 16, "{} bytes", enc.len());
        assert_eq!(crate::proto::codec::decode::<Chunk>(&enc).unwrap(), c);
        // The plain (array) form still decodes.
        let enc = crate::proto::codec::encode(&Plain { data: vec![1, 200] }).unwrap();
        let d: Chunk = crate::proto::codec::decode(&enc).unwrap();
        assert_eq!(d.data, vec![1, 200]);
    }
}
