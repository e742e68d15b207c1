//! The marker: a fresh 128-bit nonce per run, stored only in kernel memory.
//!
//! The nonce never appears in a message, a log line or the state file. The kernel reports
//! only a keyed digest (`sha256("wsgate-marker-v1:" || nonce)`), and the state file keeps the
//! nonce sealed (XOR with a fixed pad, base64), so that a state file lying inside the scanned
//! home directory can never be mistaken for the nonce leaking to disk.

use std::fmt;

use base64::Engine as _;
use rand::RngExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::cells::encode_params;

const DIGEST_KEY: &[u8] = b"wsgate-marker-v1:";
const SEAL_KEY: &[u8] = b"wsgate-seal-v1";

/// A 128-bit nonce. `Debug` shows only its digest prefix.
#[derive(Clone, PartialEq, Eq)]
pub struct Nonce([u8; 16]);

impl Nonce {
    /// A fresh random nonce.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 16];
        rand::rng().fill(&mut bytes[..]);
        Nonce(bytes)
    }

    /// Lower-case hex, as the store cell receives it.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The digest the kernel reports for it.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        h.update(DIGEST_KEY);
        h.update(self.0);
        hex::encode(h.finalize())
    }

    /// The sealed form for the state file.
    pub fn seal(&self) -> SealedNonce {
        SealedNonce(base64::engine::general_purpose::STANDARD.encode(xor_pad(self.0)))
    }

    /// Every byte pattern the nonce could appear as on disk: its hex (both cases), its raw
    /// bytes, their base64, and the exact parameter blob the store cell was sent.
    pub fn disk_needles(&self) -> Vec<Vec<u8>> {
        let hex = self.hex();
        vec![
            hex.clone().into_bytes(),
            hex.to_uppercase().into_bytes(),
            self.0.to_vec(),
            base64::engine::general_purpose::STANDARD
                .encode(self.0)
                .into_bytes(),
            encode_params(&json!({ "nonce_hex": hex })).into_bytes(),
        ]
    }
}

impl fmt::Debug for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nonce(digest {}…)", &self.digest()[..12])
    }
}

/// The nonce as the state file keeps it (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SealedNonce(String);

impl SealedNonce {
    /// The nonce back; `None` when the text is not a sealed nonce.
    pub fn unseal(&self) -> Option<Nonce> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.0)
            .ok()?;
        let arr: [u8; 16] = bytes.try_into().ok()?;
        Some(Nonce(xor_pad(arr)))
    }
}

fn xor_pad(mut bytes: [u8; 16]) -> [u8; 16] {
    let pad = Sha256::digest(SEAL_KEY);
    for (b, p) in bytes.iter_mut().zip(pad.iter()) {
        *b ^= p;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_fresh_and_128_bit() {
        let (a, b) = (Nonce::generate(), Nonce::generate());
        assert_ne!(a, b);
        assert_eq!(a.hex().len(), 32);
        assert_eq!(a.digest().len(), 64);
    }

    #[test]
    fn sealing_round_trips_and_hides_every_needle() {
        let n = Nonce::generate();
        let sealed = n.seal();
        assert_eq!(sealed.unseal(), Some(n.clone()));
        let text = serde_json::to_string(&sealed).unwrap();
        for needle in n.disk_needles() {
            assert!(
                !text
                    .as_bytes()
                    .windows(needle.len())
                    .any(|w| w == needle.as_slice()),
                "sealed form contains a needle"
            );
        }
        assert!(!format!("{n:?}").contains(&n.hex()));
        assert_eq!(SealedNonce("bm9wZQ==".to_owned()).unseal(), None);
    }

    #[test]
    fn the_digest_matches_what_the_kernel_computes() {
        // python3 -c "import hashlib; print(hashlib.sha256(b'wsgate-marker-v1:' + bytes(16)).hexdigest())"
        assert_eq!(
            Nonce([0u8; 16]).digest(),
            "3851bbfce97f56ec60b1276ee39e26a1372c4c968d95fc1a42a3559d6cbab1de"
        );
    }
}
