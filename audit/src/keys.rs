//! The checkpoint signing key ([`Signer`], PKCS#8 PEM), its public half ([`PublicKey`], SPKI
//! PEM, which `openssl pkey -pubin` reads) and the [`KeyId`] that names it in checkpoints.

use std::fmt;

use ring::{
    rand::SystemRandom,
    signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey},
};
use serde::{Deserialize, Serialize};

use crate::{Error, Hash, Result};

const PRIVATE_KEY_TAG: &str = "PRIVATE KEY";
const PUBLIC_KEY_TAG: &str = "PUBLIC KEY";
/// The DER of an Ed25519 SubjectPublicKeyInfo up to the 32 key bytes (RFC 8410).
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Names a public key in checkpoints and in the ConfigMap `oz-audit` (`<keyId>.pub`): the first
/// 16 lowercase hex characters of the SHA-256 of the raw 32-byte Ed25519 public key.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyId(String);

impl KeyId {
    /// The id of the raw Ed25519 public key `key`.
    pub fn of(key: &[u8; 32]) -> KeyId {
        KeyId(Hash::of(key).to_string()[..16].to_string())
    }

    /// The id as written (16 lowercase hex characters).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.0)
    }
}

/// An Ed25519 public key: checks checkpoint signatures.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// The key whose raw bytes are `key`.
    pub fn from_bytes(key: [u8; 32]) -> PublicKey {
        PublicKey(key)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Reads one `-----BEGIN PUBLIC KEY-----` block (an Ed25519 SubjectPublicKeyInfo).
    pub fn from_spki_pem(text: &str) -> Result<PublicKey> {
        let block = pem::parse(text).map_err(|e| Error::Key(e.to_string()))?;
        if block.tag() != PUBLIC_KEY_TAG {
            return Err(Error::Key(format!(
                "want a PEM block {PUBLIC_KEY_TAG:?}, found {:?}",
                block.tag()
            )));
        }
        Self::from_spki_der(block.contents())
    }

    /// Reads every `-----BEGIN PUBLIC KEY-----` block of `text` (other blocks are skipped);
    /// an error if there is none or one is not an Ed25519 key.
    pub fn all_from_pem(text: &str) -> Result<Vec<PublicKey>> {
        let blocks = pem::parse_many(text).map_err(|e| Error::Key(e.to_string()))?;
        let keys = blocks
            .iter()
            .filter(|b| b.tag() == PUBLIC_KEY_TAG)
            .map(|b| Self::from_spki_der(b.contents()))
            .collect::<Result<Vec<_>>>()?;
        if keys.is_empty() {
            return Err(Error::Key(format!("no PEM block {PUBLIC_KEY_TAG:?}")));
        }
        Ok(keys)
    }

    /// Reads the DER of an Ed25519 SubjectPublicKeyInfo.
    pub fn from_spki_der(der: &[u8]) -> Result<PublicKey> {
        der.strip_prefix(&SPKI_PREFIX)
            .and_then(|key| <[u8; 32]>::try_from(key).ok())
            .map(PublicKey)
            .ok_or_else(|| Error::Key("not an Ed25519 public key (SubjectPublicKeyInfo)".into()))
    }

    /// The key as a `-----BEGIN PUBLIC KEY-----` block, `\n` line endings.
    pub fn to_spki_pem(&self) -> String {
        let mut der = SPKI_PREFIX.to_vec();
        der.extend_from_slice(&self.0);
        pem_lf(PUBLIC_KEY_TAG, der)
    }

    /// This key's id.
    pub fn key_id(&self) -> KeyId {
        KeyId::of(&self.0)
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(message, signature)
            .is_ok()
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.key_id())
    }
}

/// An Ed25519 private key: signs checkpoints. Its `Debug` shows the key id only.
pub struct Signer {
    pair: Ed25519KeyPair,
    pkcs8: Vec<u8>,
    key_id: KeyId,
}

impl Signer {
    /// A new random key.
    pub fn generate() -> Result<Signer> {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| Error::Key("could not generate an Ed25519 key".into()))?;
        Self::from_pkcs8_der(pkcs8.as_ref())
    }

    /// Reads a `-----BEGIN PRIVATE KEY-----` block: an Ed25519 PKCS#8 key, as ring or
    /// `openssl genpkey -algorithm ed25519` writes it.
    pub fn from_pkcs8_pem(text: &str) -> Result<Signer> {
        let block = pem::parse(text).map_err(|e| Error::Key(e.to_string()))?;
        if block.tag() != PRIVATE_KEY_TAG {
            return Err(Error::Key(format!(
                "want a PEM block {PRIVATE_KEY_TAG:?}, found {:?}",
                block.tag()
            )));
        }
        Self::from_pkcs8_der(block.contents())
    }

    /// Reads the DER of an Ed25519 PKCS#8 key (v1, or v2 with its public key).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Signer> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|e| Error::Key(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        let key_id = KeyId::of(public_bytes(&pair));
        Ok(Signer {
            pair,
            pkcs8: der.to_vec(),
            key_id,
        })
    }

    /// The key as a `-----BEGIN PRIVATE KEY-----` block, `\n` line endings.
    pub fn to_pkcs8_pem(&self) -> String {
        pem_lf(PRIVATE_KEY_TAG, self.pkcs8.clone())
    }

    /// The public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(*public_bytes(&self.pair))
    }

    /// The public key's id.
    pub fn key_id(&self) -> &KeyId {
        &self.key_id
    }

    /// The Ed25519 signature of `message` (64 bytes; deterministic).
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair.sign(message).as_ref().to_vec()
    }
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signer({})", self.key_id)
    }
}

fn public_bytes(pair: &Ed25519KeyPair) -> &[u8; 32] {
    pair.public_key()
        .as_ref()
        .try_into()
        .expect("an Ed25519 public key is 32 bytes")
}

fn pem_lf(tag: &str, der: Vec<u8>) -> String {
    pem::encode_config(
        &pem::Pem::new(tag, der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hash::hex;

    /// RFC 8032 §7.1, test 1: the secret key as PKCS#8 v1 (the form `openssl genpkey` writes).
    pub const RFC8032_TEST1_PEM: &str = "-----BEGIN PRIVATE KEY-----\n\
        MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n\
        -----END PRIVATE KEY-----\n";

    #[test]
    fn a_known_key_reads_back_signs_as_rfc8032_says_and_names_itself() {
        let signer = Signer::from_pkcs8_pem(RFC8032_TEST1_PEM).unwrap();
        let public = signer.public_key();
        assert_eq!(
            hex(public.as_bytes()),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        // RFC 8032 §7.1 test 1: the signature of the empty message.
        assert_eq!(
            hex(&signer.sign(b"")),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155\
             5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        );
        assert!(public.verifies(b"", &signer.sign(b"")));
        assert!(!public.verifies(b"x", &signer.sign(b"")));
        // The SPKI PEM that `openssl pkey -in KEY -pubout` prints for this key.
        assert_eq!(
            public.to_spki_pem(),
            "-----BEGIN PUBLIC KEY-----\n\
             MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n\
             -----END PUBLIC KEY-----\n"
        );
        assert_eq!(
            signer.key_id().as_str(),
            &Hash::of(public.as_bytes()).to_string()[..16]
        );
        assert_eq!(public.key_id(), *signer.key_id());
        assert_eq!(
            format!("{signer:?}"),
            format!("Signer({})", signer.key_id())
        );
    }

    #[test]
    fn generated_keys_round_trip_through_pem() {
        let signer = Signer::generate().unwrap();
        let again = Signer::from_pkcs8_pem(&signer.to_pkcs8_pem()).unwrap();
        assert_eq!(again.public_key(), signer.public_key());
        let public = PublicKey::from_spki_pem(&signer.public_key().to_spki_pem()).unwrap();
        assert_eq!(public, signer.public_key());
        let other = Signer::generate().unwrap();
        assert_ne!(other.key_id(), signer.key_id());

        let bundle = format!(
            "{}{}",
            signer.public_key().to_spki_pem(),
            other.public_key().to_spki_pem()
        );
        assert_eq!(
            PublicKey::all_from_pem(&bundle).unwrap(),
            [signer.public_key(), other.public_key()]
        );
    }

    #[test]
    fn the_wrong_pem_blocks_are_refused() {
        let signer = Signer::generate().unwrap();
        assert!(PublicKey::from_spki_pem(&signer.to_pkcs8_pem()).is_err());
        assert!(Signer::from_pkcs8_pem(&signer.public_key().to_spki_pem()).is_err());
        assert!(PublicKey::all_from_pem("no pem here").is_err());
        // An RSA-sized SPKI is not an Ed25519 key.
        assert!(PublicKey::from_spki_der(&[0x30, 0x82, 0x01, 0x22]).is_err());
    }
}
