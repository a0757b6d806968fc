//! The SOCKS5 side of the proxy (RFC 1928): no authentication, CONNECT only, with the three
//! address types. A domain is resolved by the proxy (remote DNS, `socks5h://`), after the
//! rules granted it. BIND and UDP ASSOCIATE are refused with "command not supported".

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use paddock_policy::HostName;

/// Reply codes.
pub(crate) const SUCCEEDED: u8 = 0x00;
pub(crate) const GENERAL_FAILURE: u8 = 0x01;
pub(crate) const NOT_ALLOWED: u8 = 0x02;
pub(crate) const HOST_UNREACHABLE: u8 = 0x04;
pub(crate) const CONNECTION_REFUSED: u8 = 0x05;
pub(crate) const COMMAND_NOT_SUPPORTED: u8 = 0x07;
pub(crate) const ADDRESS_NOT_SUPPORTED: u8 = 0x08;

/// What a SOCKS5 client asked for.
#[derive(Debug)]
pub(crate) struct SocksRequest {
    /// 1 CONNECT, 2 BIND, 3 UDP ASSOCIATE.
    pub(crate) command: u8,
    /// The destination, or why it is not one (with the raw text, escaped).
    pub(crate) host: Result<HostName, (String, String)>,
    pub(crate) port: u16,
}

/// Reads the greeting (its first byte, the version, was read already) and the request from
/// `r`, answering on `w`. `Err` means the connection is to be closed (a reply was sent where
/// the protocol has one).
pub(crate) fn handshake(r: &mut impl Read, w: &mut impl Write) -> Result<SocksRequest, ()> {
    let mut n = [0u8; 1];
    r.read_exact(&mut n).map_err(drop)?;
    let mut methods = vec![0u8; usize::from(n[0])];
    r.read_exact(&mut methods).map_err(drop)?;
    if !methods.contains(&0x00) {
        let _ = w.write_all(&[0x05, 0xff]);
        return Err(());
    }
    w.write_all(&[0x05, 0x00]).map_err(drop)?;
    let mut head = [0u8; 4];
    r.read_exact(&mut head).map_err(drop)?;
    if head[0] != 0x05 {
        return Err(());
    }
    let host = match head[3] {
        0x01 => {
            let mut a = [0u8; 4];
            r.read_exact(&mut a).map_err(drop)?;
            Ok(HostName::Ip(IpAddr::V4(Ipv4Addr::from(a))))
        }
        0x04 => {
            let mut a = [0u8; 16];
            r.read_exact(&mut a).map_err(drop)?;
            // Through `HostName::parse`, so that a mapped address folds to IPv4 as
            // everywhere else.
            let text = Ipv6Addr::from(a).to_string();
            HostName::parse(&text).map_err(|e| (text, e))
        }
        0x03 => {
            let mut len = [0u8; 1];
            r.read_exact(&mut len).map_err(drop)?;
            let mut name = vec![0u8; usize::from(len[0])];
            r.read_exact(&mut name).map_err(drop)?;
            match String::from_utf8(name) {
                Ok(text) => HostName::parse(&text)
                    .map(crate::proxy::rules::canonical)
                    .map_err(|e| (text.escape_debug().to_string(), e)),
                Err(e) => {
                    let raw = String::from_utf8_lossy(e.as_bytes()).escape_debug().to_string();
                    Err((raw, "the name is not UTF-8".to_owned()))
                }
            }
        }
        _ => {
            reply(&mut *w, ADDRESS_NOT_SUPPORTED, None);
            return Err(());
        }
    };
    let mut port = [0u8; 2];
    r.read_exact(&mut port).map_err(drop)?;
    Ok(SocksRequest { command: head[1], host, port: u16::from_be_bytes(port) })
}

/// Sends a reply with the bound address (zeros when there is none).
pub(crate) fn reply(mut w: impl Write, code: u8, bound: Option<SocketAddr>) {
    let mut out = vec![0x05, code, 0x00];
    match bound {
        Some(SocketAddr::V6(a)) => {
            out.push(0x04);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        Some(SocketAddr::V4(a)) => {
            out.push(0x01);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        None => out.extend_from_slice(&[0x01, 0, 0, 0, 0, 0, 0]),
    }
    let _ = w.write_all(&out);
}
