//! Property tests: strace's quoting round-trips through the decoder for any bytes, inside a
//! whole log line too; and a call split into `<unfinished ...>`/`resumed>` at any byte (even
//! inside a string) yields the same event and the same denial as the unsplit line.

use paddock_strace_parse::quote::{StringStyle, decode, encode};
use paddock_strace_parse::{Denial, Event, Record, denials, parse_slice};
use proptest::prelude::*;

fn style() -> impl Strategy<Value = StringStyle> {
    prop_oneof![
        Just(StringStyle::Default),
        Just(StringStyle::HexNonAscii),
        Just(StringStyle::HexAll),
        Just(StringStyle::NonAsciiChars),
        Just(StringStyle::Decoration),
    ]
}

/// Bytes biased towards what makes parsing hard: quotes, backslashes, digits after escapes,
/// parentheses, `<>`, commas, `=`, newlines, high bytes.
fn nasty_bytes() -> impl Strategy<Value = Vec<u8>> {
    let interesting = prop_oneof![
        Just(b'"'),
        Just(b'\\'),
        Just(b'('),
        Just(b')'),
        Just(b'<'),
        Just(b'>'),
        Just(b','),
        Just(b'='),
        Just(b'\n'),
        Just(b' '),
        Just(b'7'),
        Just(0u8),
        Just(0xffu8),
        any::<u8>(),
    ];
    prop::collection::vec(interesting, 0..64)
}

fn events(log: &[u8]) -> (Vec<Event<'static>>, usize) {
    let mut diags = 0;
    let mut evs = Vec::new();
    for r in parse_slice(log) {
        match r {
            Record::Event(e) => evs.push(e.into_owned()),
            Record::Diagnostic(_) => diags += 1,
        }
    }
    (evs, diags)
}

fn all_denials(log: &[u8]) -> Vec<Denial> {
    denials(parse_slice(log)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn quoting_round_trips(bytes in nasty_bytes(), style in style()) {
        prop_assert_eq!(decode(&encode(&bytes, style)), bytes);
    }

    #[test]
    fn paths_round_trip_through_a_log_line(
        path in nasty_bytes(),
        dir in nasty_bytes(),
        style in style(),
        pid in 1u32..5_000_000,
    ) {
        let quoted = encode(&path, if style == StringStyle::Decoration { StringStyle::Default } else { style });
        let mut line = format!("{pid:<5} openat(3<").into_bytes();
        line.extend(encode(&dir, StringStyle::Decoration));
        line.extend_from_slice(b">, \"");
        line.extend(&quoted);
        line.extend_from_slice(b"\", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)\n");
        let d = all_denials(&line);
        prop_assert_eq!(d.len(), 1);
        prop_assert_eq!(d[0].pid, Some(pid));
        prop_assert_eq!(&d[0].paths[0].bytes, &path);
        prop_assert!(!d[0].truncated());
        let dirfd = d[0].dirfd().cloned().unwrap();
        prop_assert_eq!(dirfd.decoration.as_deref(), Some(&dir[..]));
        prop_assert_eq!(d[0].flags.as_deref(), Some("O_RDONLY|O_CLOEXEC"));
    }

    #[test]
    fn a_split_anywhere_gives_the_same_event(
        path in nasty_bytes(),
        other in nasty_bytes(),
        at in any::<prop::sample::Index>(),
        untagged in any::<bool>(),
    ) {
        let mut args = b"AT_FDCWD, \"".to_vec();
        args.extend(encode(&path, StringStyle::Default));
        args.extend_from_slice(b"\", O_WRONLY|O_CREAT, 0644");
        let ret = b") = -1 EACCES (Permission denied) <0.000012>\n";
        let mut whole = b"77    openat(".to_vec();
        whole.extend(&args);
        whole.extend(ret);

        let mut p = at.index(args.len() + 1);
        if untagged {
            // strace splits a call only between arguments, never inside a quoted string. A
            // tagged resume (`<... openat resumed>`) is exact at any byte; an untagged `-Z`
            // continuation inside a string is ambiguous (a rest starting `77\"...` after a
            // split octal escape reads as a new line of pid 77), so untagged splits that fall
            // inside the path string are moved to just after it.
            let open = b"AT_FDCWD, ".len();
            let close = open + 2 + encode(&path, StringStyle::Default).len();
            if p > open && p < close {
                p = close;
            }
        }
        let mut split = b"77    openat(".to_vec();
        split.extend(&args[..p]);
        split.extend_from_slice(b" <unfinished ...>\n");
        if !untagged {
            // Another thread prints in between; `-Z` logs have the rest right after.
            split.extend_from_slice(b"78    openat(AT_FDCWD, \"");
            split.extend(encode(&other, StringStyle::Default));
            split.extend_from_slice(b"\", O_RDONLY) = 3\n77    <... openat resumed>");
        }
        split.extend(&args[p..]);
        split.extend(ret);

        let (mut want, want_diags) = events(&whole);
        let (mut got, got_diags) = events(&split);
        prop_assert_eq!(want_diags, 0);
        prop_assert_eq!(got_diags, 0);
        let got_call = got.pop().unwrap();
        let want_call = want.pop().unwrap();
        let (g, w) = (got_call.syscall().unwrap(), want_call.syscall().unwrap());
        prop_assert!(g.split);
        prop_assert_eq!(&g.name, &w.name);
        prop_assert_eq!(&g.args, &w.args);
        prop_assert_eq!(&g.ret, &w.ret);
        prop_assert_eq!(g.duration, w.duration);
        prop_assert_eq!(got_call.pid, want_call.pid);
        let mut gd = all_denials(&split);
        let mut wd = all_denials(&whole);
        prop_assert_eq!(gd.len(), 1);
        let (mut g, mut w) = (gd.pop().unwrap(), wd.pop().unwrap());
        g.line = 0;
        w.line = 0;
        prop_assert_eq!(g, w);
    }

    #[test]
    fn any_input_parses_without_panicking(log in prop::collection::vec(any::<u8>(), 0..512)) {
        let slice: Vec<_> = parse_slice(&log).map(Record::into_owned).collect();
        let reader: Vec<_> = paddock_strace_parse::parse_reader(&log[..]).collect();
        prop_assert_eq!(slice.len(), reader.len());
        let _ = all_denials(&log);
    }
}
