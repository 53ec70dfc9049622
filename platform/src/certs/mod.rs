//! The webhook's own CA and serving certificate: generating them with rcgen, and reading stored
//! ones back to decide whether they can still be used.
//!
//! Everything in this file is pure: the current time is a parameter, and nothing talks to
//! Kubernetes. [`secrets`] keeps the results in Secrets, and `rotation` keeps the served
//! certificate and every `caBundle` in step with them.

pub mod rotation;
pub mod secrets;

use std::{fmt, net::IpAddr, time::Duration};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
/// The time type these functions take: the `time` crate's, as rcgen uses.
pub use time::OffsetDateTime;
use x509_parser::{certificate::X509Certificate, extensions::GeneralName, pem::Pem};

/// How long the CA and serving certificate live, and how early they are replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertSettings {
    /// Lifetime of a new CA. Default 10 years.
    pub ca_validity: Duration,
    /// Lifetime of a new serving certificate (never beyond its CA's). Default 1 year.
    pub cert_validity: Duration,
    /// A CA or certificate is replaced once it expires within this long. Default 30 days.
    pub renew_before: Duration,
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// New certificates start this long in the past, so a peer whose clock is slightly behind
/// already accepts them.
const BACKDATE: Duration = Duration::from_secs(5 * 60);

impl Default for CertSettings {
    fn default() -> Self {
        Self {
            ca_validity: DAY * 3650,
            cert_validity: DAY * 365,
            renew_before: DAY * 30,
        }
    }
}

impl CertSettings {
    /// Refuses settings under which a fresh certificate would already need renewing, which
    /// would regenerate it on every check.
    pub fn validate(&self) -> Result<(), CertError> {
        if self.renew_before >= self.cert_validity || self.renew_before >= self.ca_validity {
            return Err(CertError::Settings(format!(
                "the renewal window ({:?}) must be shorter than the CA's ({:?}) and the serving \
                 certificate's ({:?}) validity",
                self.renew_before, self.ca_validity, self.cert_validity
            )));
        }
        Ok(())
    }
}

/// A PEM certificate (or chain, leaf first) and its PEM private key.
#[derive(Clone, PartialEq, Eq)]
pub struct PemPair {
    /// The certificate PEM.
    pub cert: String,
    /// The private key PEM (PKCS#8).
    pub key: String,
}

impl fmt::Debug for PemPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PemPair")
            .field("cert", &self.cert)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("invalid certificate settings: {0}")]
    Settings(String),
    #[error("could not generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the CA cannot sign: {0}")]
    Ca(Unusable),
}

/// Why a stored certificate is not used as it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("the certificate PEM does not parse: {0}")]
    BadCertificate(String),
    #[error("the private key PEM does not parse: {0}")]
    BadKey(String),
    #[error("the private key does not belong to the certificate")]
    KeyMismatch,
    #[error("the certificate is not a CA")]
    NotCa,
    #[error("the certificate is not valid before {0}")]
    NotYetValid(OffsetDateTime),
    #[error("the certificate expired at {0}")]
    Expired(OffsetDateTime),
    #[error("the certificate expires at {not_after}, inside the renewal window")]
    RenewalDue {
        /// When it expires.
        not_after: OffsetDateTime,
    },
    #[error("the certificate does not name {0:?}")]
    MissingNames(Vec<String>),
    #[error("the certificate is not signed by the current CA")]
    NotSignedByCa,
}

/// What a usable stored certificate says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// Start of validity.
    pub not_before: OffsetDateTime,
    /// End of validity.
    pub not_after: OffsetDateTime,
    /// Whether it is a CA certificate.
    pub is_ca: bool,
    /// DNS names and IP addresses from its subjectAltName, IPs in their usual text form.
    pub names: Vec<String>,
}

/// A new self-signed CA, valid for `settings.ca_validity` from `now`.
pub fn generate_ca(settings: &CertSettings, now: OffsetDateTime) -> Result<PemPair, CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "oz webhook CA");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "oz");
    // It only ever signs serving certificates, never other CAs.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = now - BACKDATE;
    params.not_after = now + settings.ca_validity;
    let cert = params.self_signed(&key)?;
    Ok(PemPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A new serving certificate for `names` (DNS names or IP addresses), signed by `ca`, valid
/// for `validity` from `now` but never beyond the CA itself.
pub fn issue_serving_cert(
    ca: &PemPair,
    names: &[String],
    validity: Duration,
    now: OffsetDateTime,
) -> Result<PemPair, CertError> {
    let ca_info = inspect(ca).map_err(CertError::Ca)?;
    let ca_key = KeyPair::from_pem(&ca.key)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key)?;

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    params
        .distinguished_name
        .push(DnType::OrganizationName, "oz");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - BACKDATE;
    params.not_after = (now + validity).min(ca_info.not_after);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(PemPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// Reads the first certificate of `pair.cert` and checks that `pair.key` is its private key.
pub fn inspect(pair: &PemPair) -> Result<CertInfo, Unusable> {
    let pem = parse_pem(&pair.cert)?;
    let cert = parse_cert(&pem)?;
    let key = KeyPair::from_pem(&pair.key).map_err(|e| Unusable::BadKey(e.to_string()))?;
    if key.public_key_raw() != &cert.public_key().subject_public_key.data[..] {
        return Err(Unusable::KeyMismatch);
    }
    Ok(info(&cert))
}

/// Checks a stored CA: it parses, its key matches, it is a CA, and it is valid now and beyond
/// the renewal window.
pub fn check_ca(
    ca: &PemPair,
    settings: &CertSettings,
    now: OffsetDateTime,
) -> Result<CertInfo, Unusable> {
    let info = inspect(ca)?;
    if !info.is_ca {
        return Err(Unusable::NotCa);
    }
    check_window(&info, settings, now)?;
    Ok(info)
}

/// Checks a stored serving certificate: it parses, its key matches, it is signed by `ca_cert`
/// (PEM), it names every one of `names`, and it is valid now and beyond the renewal window.
pub fn check_serving(
    serving: &PemPair,
    ca_cert: &str,
    names: &[String],
    settings: &CertSettings,
    now: OffsetDateTime,
) -> Result<CertInfo, Unusable> {
    let info = inspect(serving)?;
    let leaf_pem = parse_pem(&serving.cert)?;
    let leaf = parse_cert(&leaf_pem)?;
    let ca_pem = parse_pem(ca_cert)?;
    let ca = parse_cert(&ca_pem)?;
    if leaf.issuer() != ca.subject() || leaf.verify_signature(Some(ca.public_key())).is_err() {
        return Err(Unusable::NotSignedByCa);
    }
    let missing: Vec<String> = names
        .iter()
        .filter(|wanted| !info.names.iter().any(|n| same_name(n, wanted)))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(Unusable::MissingNames(missing));
    }
    check_window(&info, settings, now)?;
    Ok(info)
}

/// The DER of every certificate in a PEM bundle (such as a `caBundle`), for clients that
/// take trust roots as DER.
pub fn certificates_der(pem: &str) -> Result<Vec<Vec<u8>>, Unusable> {
    let mut certificates = Vec::new();
    for block in Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| Unusable::BadCertificate(e.to_string()))?;
        if block.label == "CERTIFICATE" {
            parse_cert(&block)?;
            certificates.push(block.contents);
        }
    }
    if certificates.is_empty() {
        return Err(Unusable::BadCertificate("no CERTIFICATE block".into()));
    }
    Ok(certificates)
}

/// True if `pem` holds at least one certificate that parses.
pub fn is_certificate_pem(pem: &str) -> bool {
    parse_pem(pem)
        .and_then(|p| parse_cert(&p).map(|_| ()))
        .is_ok()
}

fn check_window(
    info: &CertInfo,
    settings: &CertSettings,
    now: OffsetDateTime,
) -> Result<(), Unusable> {
    if now < info.not_before {
        return Err(Unusable::NotYetValid(info.not_before));
    }
    if now >= info.not_after {
        return Err(Unusable::Expired(info.not_after));
    }
    if now + settings.renew_before >= info.not_after {
        return Err(Unusable::RenewalDue {
            not_after: info.not_after,
        });
    }
    Ok(())
}

fn parse_pem(pem: &str) -> Result<Pem, Unusable> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| Unusable::BadCertificate(e.to_string()))?;
    if pem.label != "CERTIFICATE" {
        return Err(Unusable::BadCertificate(format!(
            "expected a CERTIFICATE block, found {}",
            pem.label
        )));
    }
    Ok(pem)
}

fn parse_cert(pem: &Pem) -> Result<X509Certificate<'_>, Unusable> {
    pem.parse_x509()
        .map_err(|e| Unusable::BadCertificate(e.to_string()))
}

fn info(cert: &X509Certificate<'_>) -> CertInfo {
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => names.push(dns.to_string()),
                GeneralName::IPAddress(bytes) => {
                    if let Some(ip) = ip_from_bytes(bytes) {
                        names.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    CertInfo {
        not_before: cert.validity().not_before.to_datetime(),
        not_after: cert.validity().not_after.to_datetime(),
        is_ca: cert.is_ca(),
        names,
    }
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

/// DNS names compare case-insensitively; IP addresses by value (`::1` and `0:0::1` are equal).
fn same_name(have: &str, wanted: &str) -> bool {
    match (have.parse::<IpAddr>(), wanted.parse::<IpAddr>()) {
        (Ok(a), Ok(b)) => a == b,
        (Err(_), Err(_)) => have.eq_ignore_ascii_case(wanted),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn loopback() -> Vec<String> {
        vec!["127.0.0.1".into(), "localhost".into()]
    }

    fn service_names() -> Vec<String> {
        [
            "oz-webhook",
            "oz-webhook.oz-system",
            "oz-webhook.oz-system.svc",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn a_new_ca_is_a_ca_valid_for_the_configured_time() {
        let settings = CertSettings::default();
        let ca = generate_ca(&settings, now()).unwrap();
        let info = check_ca(&ca, &settings, now()).unwrap();
        assert!(info.is_ca);
        assert_eq!(info.not_after, now() + DAY * 3650);
        assert!(info.not_before < now());
        assert!(ca.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(ca.key.contains("PRIVATE KEY"));
        assert!(!format!("{ca:?}").contains(&ca.key), "Debug hides the key");
    }

    #[test]
    fn a_serving_cert_names_what_it_serves_and_is_signed_by_its_ca() {
        let settings = CertSettings::default();
        let ca = generate_ca(&settings, now()).unwrap();
        for names in [loopback(), service_names()] {
            let leaf = issue_serving_cert(&ca, &names, settings.cert_validity, now()).unwrap();
            let info = check_serving(&leaf, &ca.cert, &names, &settings, now()).unwrap();
            assert!(!info.is_ca);
            assert_eq!(info.names, names);
            assert_eq!(info.not_after, now() + DAY * 365);
        }
    }

    #[test]
    fn a_serving_cert_never_outlives_its_ca() {
        let settings = CertSettings {
            ca_validity: DAY * 100,
            ..Default::default()
        };
        let ca = generate_ca(&settings, now()).unwrap();
        let leaf = issue_serving_cert(&ca, &loopback(), DAY * 365, now()).unwrap();
        assert_eq!(inspect(&leaf).unwrap().not_after, now() + DAY * 100);
    }

    #[test]
    fn a_cert_is_reused_until_its_renewal_window() {
        let settings = CertSettings::default();
        let ca = generate_ca(&settings, now()).unwrap();
        let leaf = issue_serving_cert(&ca, &loopback(), settings.cert_validity, now()).unwrap();
        let later = now() + DAY * 334;
        assert!(check_ca(&ca, &settings, later).is_ok());
        assert!(check_serving(&leaf, &ca.cert, &loopback(), &settings, later).is_ok());

        let in_window = now() + DAY * 336;
        assert!(matches!(
            check_serving(&leaf, &ca.cert, &loopback(), &settings, in_window),
            Err(Unusable::RenewalDue { .. })
        ));
        assert!(matches!(
            check_ca(&ca, &settings, now() + DAY * 3621),
            Err(Unusable::RenewalDue { .. })
        ));
        assert!(matches!(
            check_serving(&leaf, &ca.cert, &loopback(), &settings, now() + DAY * 400),
            Err(Unusable::Expired(_))
        ));
        assert!(matches!(
            check_ca(&ca, &settings, now() - DAY),
            Err(Unusable::NotYetValid(_))
        ));
    }

    #[test]
    fn a_serving_cert_from_another_ca_is_not_used() {
        let settings = CertSettings::default();
        let old_ca = generate_ca(&settings, now()).unwrap();
        let new_ca = generate_ca(&settings, now()).unwrap();
        let leaf = issue_serving_cert(&old_ca, &loopback(), DAY * 365, now()).unwrap();
        assert_eq!(
            check_serving(&leaf, &new_ca.cert, &loopback(), &settings, now()),
            Err(Unusable::NotSignedByCa)
        );
    }

    #[test]
    fn a_serving_cert_missing_a_name_is_not_used() {
        let settings = CertSettings::default();
        let ca = generate_ca(&settings, now()).unwrap();
        let leaf = issue_serving_cert(&ca, &loopback(), DAY * 365, now()).unwrap();
        assert_eq!(
            check_serving(&leaf, &ca.cert, &service_names(), &settings, now()),
            Err(Unusable::MissingNames(service_names()))
        );
        // A subset of its names is fine, and IP addresses compare by value.
        assert!(check_serving(&leaf, &ca.cert, &["LOCALHOST".into()], &settings, now()).is_ok());
    }

    #[test]
    fn corrupted_or_mismatched_pem_is_not_used() {
        let settings = CertSettings::default();
        let ca = generate_ca(&settings, now()).unwrap();
        let other = generate_ca(&settings, now()).unwrap();
        let garbage = PemPair {
            cert: "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"
                .into(),
            key: ca.key.clone(),
        };
        assert!(matches!(
            check_ca(&garbage, &settings, now()),
            Err(Unusable::BadCertificate(_))
        ));
        let empty = PemPair {
            cert: String::new(),
            key: String::new(),
        };
        assert!(matches!(
            check_ca(&empty, &settings, now()),
            Err(Unusable::BadCertificate(_))
        ));
        let bad_key = PemPair {
            cert: ca.cert.clone(),
            key: "garbage".into(),
        };
        assert!(matches!(
            check_ca(&bad_key, &settings, now()),
            Err(Unusable::BadKey(_))
        ));
        let swapped = PemPair {
            cert: ca.cert.clone(),
            key: other.key.clone(),
        };
        assert_eq!(
            check_ca(&swapped, &settings, now()),
            Err(Unusable::KeyMismatch)
        );
        let key_as_cert = PemPair {
            cert: ca.key.clone(),
            key: ca.key.clone(),
        };
        assert!(matches!(
            check_ca(&key_as_cert, &settings, now()),
            Err(Unusable::BadCertificate(_))
        ));
    }

    #[test]
    fn a_leaf_is_not_accepted_as_a_ca() {
        let settings = CertSettings::default();
        let ca = generate_ca(&settings, now()).unwrap();
        let leaf = issue_serving_cert(&ca, &loopback(), DAY * 365, now()).unwrap();
        assert_eq!(check_ca(&leaf, &settings, now()), Err(Unusable::NotCa));
        assert!(matches!(
            issue_serving_cert(&garbage_ca(), &loopback(), DAY, now()),
            Err(CertError::Ca(_))
        ));
    }

    fn garbage_ca() -> PemPair {
        PemPair {
            cert: "nope".into(),
            key: "nope".into(),
        }
    }

    #[test]
    fn settings_whose_window_covers_a_whole_lifetime_are_refused() {
        assert!(CertSettings::default().validate().is_ok());
        let bad = CertSettings {
            cert_validity: DAY * 30,
            ..Default::default()
        };
        assert!(matches!(bad.validate(), Err(CertError::Settings(_))));
    }

    #[test]
    fn a_bundle_converts_to_der_certificate_by_certificate() {
        let settings = CertSettings::default();
        let (a, b) = (
            generate_ca(&settings, now()).unwrap(),
            generate_ca(&settings, now()).unwrap(),
        );
        let der = certificates_der(&format!("{}{}", a.cert, b.cert)).unwrap();
        assert_eq!(der.len(), 2);
        assert_ne!(der[0], der[1]);
        assert!(certificates_der(&a.key).is_err());
        assert!(certificates_der("").is_err());
    }

    #[test]
    fn served_names_compare_like_tls_clients_do() {
        assert!(same_name("127.0.0.1", "127.0.0.1"));
        assert!(same_name("::1", "0:0::1"));
        assert!(same_name("Oz-Webhook.svc", "oz-webhook.svc"));
        assert!(!same_name("127.0.0.1", "localhost"));
    }
}
