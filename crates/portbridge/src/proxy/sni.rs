//! Reading the server name (SNI) from a TLS ClientHello, to refuse a tunnel whose TLS names
//! another server than the one it was opened to (domain fronting, NET-10).
//!
//! Only the first TLS record is read. A ClientHello that does not fit in it, or that is
//! malformed, is "unreadable" and the tunnel is refused (fail closed): a name hidden in a
//! second record would otherwise go unchecked.

/// What the first bytes of a tunnel say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// More bytes are needed to decide.
    NeedMore,
    /// Not a TLS handshake: nothing to check.
    NotTls,
    /// A ClientHello without a server name.
    NoName,
    /// The server name, as sent.
    Name(String),
    /// A TLS handshake that could not be read.
    Unreadable,
}

/// The largest TLS record (2^14 plus room for expansion).
pub(crate) const MAX_RECORD: usize = 16384 + 2048;

/// Looks at the buffered first bytes of a tunnel.
pub(crate) fn client_hello(buf: &[u8]) -> Hello {
    let Some(&first) = buf.first() else { return Hello::NeedMore };
    if first != 0x16 {
        return Hello::NotTls;
    }
    if buf.len() < 5 {
        return Hello::NeedMore;
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if len > MAX_RECORD {
        return Hello::Unreadable;
    }
    if buf.len() < 5 + len {
        return Hello::NeedMore;
    }
    parse_hello(&buf[5..5 + len]).unwrap_or(Hello::Unreadable)
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
    fn u24(&mut self) -> Option<usize> {
        self.take(3).map(|b| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    }
}

fn parse_hello(record: &[u8]) -> Option<Hello> {
    let mut c = Cursor(record);
    if c.u8()? != 0x01 {
        return None; // Not a ClientHello.
    }
    let body_len = c.u24()?;
    let mut c = Cursor(c.take(body_len)?);
    c.take(2 + 32)?; // version, random
    let n = c.u8()?;
    c.take(n)?; // session id
    let n = c.u16()?;
    c.take(n)?; // cipher suites
    let n = c.u8()?;
    c.take(n)?; // compression methods
    if c.0.is_empty() {
        return Some(Hello::NoName);
    }
    let n = c.u16()?;
    let mut ext = Cursor(c.take(n)?);
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let n = ext.u16()?;
        let data = ext.take(n)?;
        if kind != 0 {
            continue;
        }
        let mut list = Cursor(data);
        let n = list.u16()?;
        let mut list = Cursor(list.take(n)?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let n = list.u16()?;
            let name = list.take(n)?;
            if name_type == 0 {
                return Some(Hello::Name(String::from_utf8_lossy(name).into_owned()));
            }
        }
        return Some(Hello::NoName);
    }
    Some(Hello::NoName)
}

/// A minimal ClientHello with the given server name, for tests.
#[cfg(test)]
pub(crate) fn hello_with(sni: Option<&str>) -> Vec<u8> {
    let mut ext = Vec::new();
    if let Some(name) = sni {
        let name = name.as_bytes();
        let mut entry = vec![0u8];
        entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
        entry.extend_from_slice(name);
        let mut data = (entry.len() as u16).to_be_bytes().to_vec();
        data.extend_from_slice(&entry);
        ext.extend_from_slice(&[0, 0]);
        ext.extend_from_slice(&(data.len() as u16).to_be_bytes());
        ext.extend_from_slice(&data);
    }
    ext.extend_from_slice(&[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]); // ec_point_formats
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7u8; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![0x01, 0];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_server_name() {
        let hello = hello_with(Some("allowed.test"));
        assert_eq!(client_hello(&hello), Hello::Name("allowed.test".into()));
        for cut in [0, 1, 4, 5, hello.len() - 1] {
            assert_eq!(client_hello(&hello[..cut]), Hello::NeedMore, "cut at {cut}");
        }
        assert_eq!(client_hello(&hello_with(None)), Hello::NoName);
    }

    #[test]
    fn other_protocols_and_garbage() {
        assert_eq!(client_hello(b"SSH-2.0-x\r\n"), Hello::NotTls);
        assert_eq!(client_hello(&[0x16, 3, 1, 0, 4, 2, 0, 0, 0]), Hello::Unreadable);
        assert_eq!(client_hello(&[0x16, 3, 1, 0xff, 0xff]), Hello::Unreadable);
        let mut lying = hello_with(Some("a.test"));
        lying[8] = 0xff; // handshake length beyond the record
        assert_eq!(client_hello(&lying), Hello::Unreadable);
    }
}
