//! Questions about the seccomp filter's decisions, answered from the filter's own rules
//! ([`seccomp::rules`]), for the code that explains them afterwards (the classifier of a
//! trace, `paddock learn`): "did the filter refuse this `socket(AF_UNIX, ...)`?" is never
//! restated elsewhere, so it cannot drift from what the filter does.

use paddock_policy::{ResolvedPolicy, UnixSockets};

use crate::seccomp::{self, Action, Cond, CondOp, FilterOptions, SyscallRule};

/// The filter options of a task under `policy`, as the plan builds them; `observe` when
/// the task runs with the observers (`Task::observe`).
pub fn options_for(policy: &ResolvedPolicy, observe: bool) -> FilterOptions {
    let unix_sockets = matches!(policy.unix_sockets, UnixSockets::All);
    FilterOptions {
        unix_sockets,
        unix_sockets_notified: observe && matches!(policy.unix_sockets, UnixSockets::None),
        unix_socket_paths: matches!(policy.unix_sockets, UnixSockets::Paths { .. }),
    }
}

/// The filter options when unix sockets are not granted and no notification filter runs:
/// what a default policy gets under strace.
pub fn options_without_unix_sockets() -> FilterOptions {
    FilterOptions { unix_sockets: false, unix_sockets_notified: false, unix_socket_paths: false }
}

/// How the filter made of `rules` answers the call `name` with arguments `args` (missing
/// ones read as 0): `None` when it lets the call through.
pub fn verdict(rules: &[SyscallRule], name: &str, args: &[u64]) -> Option<Action> {
    let arg = |i: u8| args.get(usize::from(i)).copied().unwrap_or(0);
    rules
        .iter()
        .filter(|r| r.name == name)
        .find(|r| r.when.is_empty() || r.when.iter().any(|all| all.iter().all(|c| holds(c, arg))))
        .map(|r| r.action)
}

/// A condition on the low 32 bits of its argument, as the filter compares (`Dword`).
fn holds(c: &Cond, arg: impl Fn(u8) -> u64) -> bool {
    let low = |v: u64| v & 0xffff_ffff;
    let a = low(arg(c.arg));
    match c.op {
        CondOp::Eq => a == low(c.value),
        CondOp::Ne => a != low(c.value),
        CondOp::MaskedEq(mask) => a & low(mask) == low(c.value),
    }
}

/// Whether the filter built with `opts` refuses `call` (`socket` or `socketpair`) with
/// this `family`, `kind` (the type, flags included) and `protocol`.
pub fn refuses_socket(
    opts: FilterOptions,
    call: &str,
    family: u64,
    kind: u64,
    protocol: u64,
) -> bool {
    verdict(&seccomp::rules(opts), call, &[family, kind, protocol]).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const AF_UNIX: u64 = 1;
    const AF_INET: u64 = 2;
    const SOCK_STREAM: u64 = 1;
    const SOCK_DGRAM: u64 = 2;
    const SOCK_SEQPACKET: u64 = 5;
    const SOCK_CLOEXEC: u64 = 0o2_000_000;

    #[test]
    fn unix_sockets_and_datagram_pairs_are_refused_unless_granted() {
        let no = options_without_unix_sockets();
        assert!(refuses_socket(no, "socket", AF_UNIX, SOCK_STREAM, 0));
        assert!(refuses_socket(no, "socketpair", AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        assert!(!refuses_socket(no, "socketpair", AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        assert!(!refuses_socket(no, "socketpair", AF_UNIX, SOCK_STREAM, 0));
        assert!(!refuses_socket(no, "socket", AF_INET, SOCK_STREAM, 0));
        let yes = FilterOptions { unix_sockets: true, ..no };
        assert!(!refuses_socket(yes, "socket", AF_UNIX, SOCK_STREAM, 0));
        assert!(!refuses_socket(yes, "socketpair", AF_UNIX, SOCK_DGRAM, 0));
        // Paths: streams and seqpackets, whose connects the supervisor decides; never a
        // datagram socket, which reaches a path through a send's address.
        let paths = FilterOptions { unix_socket_paths: true, ..no };
        assert!(!refuses_socket(paths, "socket", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        assert!(!refuses_socket(paths, "socket", AF_UNIX, SOCK_SEQPACKET, 0));
        assert!(refuses_socket(paths, "socket", AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        assert!(refuses_socket(paths, "socket", AF_UNIX, 3, 0));
        assert!(refuses_socket(paths, "socketpair", AF_UNIX, SOCK_DGRAM, 0));
    }

    #[test]
    fn arguments_are_compared_on_their_low_32_bits() {
        let no = options_without_unix_sockets();
        // High garbage bits do not get a call past the filter (SEC-02).
        assert!(refuses_socket(no, "socket", AF_UNIX | 1 << 32, SOCK_STREAM, 0));
        let rules = seccomp::rules(no);
        assert_eq!(verdict(&rules, "clone3", &[]), Some(Action::Enosys));
        assert_eq!(verdict(&rules, "read", &[0, 0, 0]), None);
    }
}
