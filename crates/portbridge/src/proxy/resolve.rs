//! Name resolution for the proxy, behind a trait so that tests (and embedders with their own
//! DNS) decide what a name means without touching `/etc/hosts`.
//!
//! The proxy calls the resolver only for names its rules grant, and connects to exactly the
//! addresses the resolver returned (no second lookup that could answer differently).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Mutex, PoisonError};

/// Turns a granted host name into addresses.
pub trait Resolver: Send + Sync + fmt::Debug {
    /// The addresses of `name` (lowercase, no trailing dot), in the order to try them.
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The host's resolver (`getaddrinfo`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let mut out: Vec<IpAddr> = Vec::new();
        for addr in (name, port).to_socket_addrs()? {
            if !out.contains(&addr.ip()) {
                out.push(addr.ip());
            }
        }
        Ok(out)
    }
}

/// A fixed table of names, for tests: every lookup is logged, unknown names fail.
#[derive(Debug, Default)]
pub struct StaticResolver {
    table: HashMap<String, Vec<IpAddr>>,
    log: Mutex<Vec<String>>,
}

impl StaticResolver {
    /// An empty table.
    pub fn new() -> StaticResolver {
        StaticResolver::default()
    }

    /// Adds `name` with its addresses.
    pub fn with(mut self, name: &str, addrs: &[IpAddr]) -> StaticResolver {
        self.table.insert(name.to_owned(), addrs.to_vec());
        self
    }

    /// Every name looked up so far, in order.
    pub fn lookups(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Resolver for StaticResolver {
    fn resolve(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).push(name.to_owned());
        self.table.get(name).cloned().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{name} is not in the test table"))
        })
    }
}
