//! The simulator's TLS identity: a CA generated at start and a serving certificate for
//! 127.0.0.1 and localhost signed by it. The CA goes into the kubeconfig, as on a real cluster.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A generated CA and serving certificate, PEM encoded.
pub struct TlsIdentity {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Generation failed (a bug: the inputs are fixed).
#[derive(Debug, thiserror::Error)]
#[error("generating the simulator's TLS certificate failed")]
pub struct TlsError(#[source] pub rcgen::Error);

/// Generates a fresh CA and a serving certificate for loopback.
pub fn generate() -> Result<TlsIdentity, TlsError> {
    let ca_key = KeyPair::generate().map_err(TlsError)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(TlsError)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "wsgate-sim-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(TlsError)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(TlsError)?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(TlsError)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "wsgate-sim-apiserver");
    let cert = params.signed_by(&key, &issuer).map_err(TlsError)?;
    Ok(TlsIdentity {
        ca_pem: ca_cert.pem(),
        cert_pem: format!("{}{}", cert.pem(), ca_cert.pem()),
        key_pem: key.serialize_pem(),
    })
}
