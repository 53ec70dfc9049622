//! [`Hash`]: the SHA-256 that links each entry to the one before it.

use std::{fmt, str::FromStr};

use ring::digest::{SHA256, digest};

/// A SHA-256 digest, written as 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The `prev` of the first entry of a chain: 64 zeros.
    pub const GENESIS: Hash = Hash([0; 32]);

    /// The SHA-256 of `bytes`. For an entry, its line's exact bytes without the `\n`.
    pub fn of(bytes: &[u8]) -> Hash {
        let mut hash = [0; 32];
        hash.copy_from_slice(digest(&SHA256, bytes).as_ref());
        Hash(hash)
    }

    /// The SHA-256 and length of everything `reader` yields, read a piece at a time: what
    /// `ozctl audit verify --recordings` compares a recording file with its session-end record.
    pub fn of_reader(mut reader: impl std::io::Read) -> std::io::Result<(Hash, u64)> {
        let mut context = ring::digest::Context::new(&SHA256);
        let mut buffer = vec![0; 64 * 1024];
        let mut length = 0u64;
        loop {
            match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    context.update(&buffer[..n]);
                    length += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut hash = [0; 32];
        hash.copy_from_slice(context.finish().as_ref());
        Ok((Hash(hash), length))
    }

    /// Reads 64 lowercase hex characters; anything else is `None`.
    pub fn from_hex(text: &str) -> Option<Hash> {
        let text = text.as_bytes();
        if text.len() != 64 {
            return None;
        }
        let mut hash = [0; 32];
        for (byte, pair) in hash.iter_mut().zip(text.chunks_exact(2)) {
            *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Some(Hash(hash))
    }
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)].into());
        text.push(DIGITS[usize::from(byte & 0xf)].into());
    }
    text
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({self})")
    }
}

impl FromStr for Hash {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Hash::from_hex(text).ok_or_else(|| format!("{text:?} is not 64 lowercase hex characters"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_read_back_from_their_hex_and_nothing_else_does() {
        let hash = Hash::of(b"abc");
        assert_eq!(
            hash.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Hash::from_hex(&hash.to_string()), Some(hash));
        assert_eq!(Hash::of_reader(&b"abc"[..]).unwrap(), (hash, 3));
        assert_eq!(Hash::GENESIS.to_string(), "0".repeat(64));
        for bad in [
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "ba7816bf",
            &format!("{hash}0"),
            &"g".repeat(64),
        ] {
            assert_eq!(Hash::from_hex(bad), None, "{bad}");
        }
    }
}
