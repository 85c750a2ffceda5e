//! A raw TLS ClientHello offering one protocol version, to check which versions a server accepts without relying on
//! a client library that may refuse old versions itself.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// TLS 1.0, 1.1 and 1.2 as ClientHello `client_version`s.
pub const TLS10: u16 = 0x0301;
pub const TLS11: u16 = 0x0302;
pub const TLS12: u16 = 0x0303;

/// Sends a ClientHello whose highest version is `version` (no `supported_versions` extension, so TLS 1.3 is not
/// offered) with ECDHE suites usable from TLS 1.0 to 1.2; returns whether the server answered with a handshake
/// record (its ServerHello) rather than an alert or a closed connection.
pub fn accepts(addr: SocketAddr, version: u16) -> bool {
    let mut body = Vec::new();
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&[7; 32]); // random
    body.push(0); // session id
    let suites: [u16; 8] = [
        0xc02b, 0xc02f, 0xcca9, 0xcca8, 0xc009, 0xc013, 0xc00a, 0xc014,
    ];
    body.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for suite in suites {
        body.extend_from_slice(&suite.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]); // compression: null
    let mut extensions = Vec::new();
    let mut extension = |kind: u16, data: &[u8]| {
        extensions.extend_from_slice(&kind.to_be_bytes());
        extensions.extend_from_slice(&(data.len() as u16).to_be_bytes());
        extensions.extend_from_slice(data);
    };
    extension(0x000a, &[0, 4, 0x00, 0x1d, 0x00, 0x17]); // supported_groups: x25519, secp256r1
    extension(0x000b, &[1, 0]); // ec_point_formats: uncompressed
    extension(0x000d, &[0, 6, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01]); // signature_algorithms
    extension(0xff01, &[0]); // renegotiation_info
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut handshake = vec![1];
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);

    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(&record).unwrap();
    let mut first = [0u8; 1];
    matches!(tcp.read(&mut first), Ok(1) if first[0] == 0x16)
}
