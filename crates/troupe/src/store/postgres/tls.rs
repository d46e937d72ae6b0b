//! TLS to PostgreSQL, with rustls: a store URL with `sslmode=require` is connected over TLS
//! only, the server's certificate checked against the web's root CAs (webpki-roots) — or, when
//! `TROUPE_STORE_CA` names a PEM file, against the CAs in it (a private CA) — and its name
//! against the URL's host. A failed check is a refused connection, never a fallback to plain
//! TCP. Without `sslmode=require` (`disable`, or the default `prefer`), connections are plain
//! TCP, as before: `prefer` is not upgraded, because a server's self-signed certificate (what
//! a default Debian install has) would then fail the check and refuse connections that work.
//!
//! The adapter between rustls and tokio-postgres is small and written here: a
//! [`MakeTlsConnect`] that makes a [`TlsConnect`] per host, whose stream is tokio-rustls's.
//! Channel binding (SCRAM-SHA-256-PLUS) is not offered; the server then uses plain SCRAM.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::store::read::{read_regular, Links};
use crate::store::BackendError;

/// The variable naming a PEM file of CA certificates to trust instead of the web's roots.
pub const CA_VARIABLE: &str = "TROUPE_STORE_CA";

/// The largest CA file read (a bundle of every public root is about 200 KiB).
const MAX_CA_BYTES: u64 = 4 << 20;

/// How a store's connections are made.
#[derive(Clone)]
pub enum Tls {
    /// Plain TCP (or a Unix socket).
    Off,
    /// TLS only, checked.
    Required(RustlsConnect),
}

impl Tls {
    /// The TLS a configuration asks for (`sslmode=require`: TLS, with the roots of
    /// `TROUPE_STORE_CA` or the web's).
    pub fn of(config: &tokio_postgres::Config) -> Result<Self, BackendError> {
        if config.get_ssl_mode() != SslMode::Require {
            return Ok(Self::Off);
        }
        let ca = std::env::var_os(CA_VARIABLE).filter(|v| !v.is_empty());
        Ok(Self::Required(RustlsConnect::new(ca.as_deref())?))
    }
}

/// Makes TLS connections with one rustls configuration.
#[derive(Clone)]
pub struct RustlsConnect(Arc<rustls::ClientConfig>);

impl RustlsConnect {
    /// Trusting the CAs of the PEM file `ca`, or the web's roots.
    pub fn new(ca: Option<&std::ffi::OsStr>) -> Result<Self, BackendError> {
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            Some(path) => {
                let bad = |why: String| {
                    BackendError::new(
                        "invalid_arguments",
                        format!(
                            "{CA_VARIABLE}={}: {why}",
                            std::path::Path::new(path).display()
                        ),
                    )
                };
                // A regular file only, read without blocking on a FIFO, and of a CA file's
                // size: a path is input like any other.
                let pem = read_regular(std::path::Path::new(path), Links::Follow, MAX_CA_BYTES)
                    .map_err(|e| bad(e.source.to_string()))?
                    .ok_or_else(|| bad("no such file".to_owned()))?;
                let certs = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(e.to_string()))?;
                if certs.is_empty() {
                    return Err(bad("the file holds no PEM certificate".to_owned()));
                }
                for cert in certs {
                    roots.add(cert).map_err(|e| bad(e.to_string()))?;
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| BackendError::new("store_error", format!("TLS setup: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self(Arc::new(config)))
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<RustlsTlsConnect, io::Error> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(RustlsTlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.0.clone()),
            name,
        })
    }
}

/// One TLS handshake with one host.
pub struct RustlsTlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            self.connector
                .connect(self.name, stream)
                .await
                .map(RustlsStream)
        })
    }
}

/// A TLS stream to the server.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sslmode_require_asks_for_tls() {
        for (url, tls) in [
            ("postgres://u@h/db", false),
            ("postgres://u@h/db?sslmode=disable", false),
            ("postgres://u@h/db?sslmode=prefer", false),
            ("postgres://u@h/db?sslmode=require", true),
        ] {
            let config: tokio_postgres::Config = url.parse().unwrap();
            let got = matches!(Tls::of(&config), Ok(Tls::Required(_)));
            assert_eq!(got, tls, "{url}");
        }
    }

    #[test]
    fn a_ca_file_that_holds_no_certificate_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = RustlsConnect::new(Some(path.as_os_str()))
            .err()
            .expect("an empty CA file was accepted");
        assert_eq!(err.code, "invalid_arguments");
        assert!(err.message.contains("TROUPE_STORE_CA"), "{}", err.message);
        let missing = dir.path().join("missing.pem");
        assert!(RustlsConnect::new(Some(missing.as_os_str())).is_err());
        // A FIFO in its place is refused at once, never waited on.
        let fifo = dir.path().join("fifo.pem");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = RustlsConnect::new(Some(fifo.as_os_str()))
            .err()
            .expect("a FIFO was accepted");
        assert_eq!(err.code, "invalid_arguments");
    }
}
