//! `cargo xtask bench unix-socket`: the cost of a connect to a unix socket granted by path
//! (`--allow-unix-socket`: the supervisor's notification round trip, `pidfd_getfd`, the
//! path resolved and connected by the supervisor) against a plain connect in the same
//! sandbox (`--allow-unix-sockets`: no notification) and outside any sandbox. The probe
//! times N connects inside one run; rounds are interleaved and the median is printed.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{cargo, run, target_dir};

/// Connects per run, and rounds.
const CONNECTS: u32 = 3000;
const ROUNDS: usize = 7;

pub fn unix_socket(root: &Path) -> Result<()> {
    let paddock = crate::build::release(root)?;
    run(cargo().args(["build", "--release", "-p", "paddock-tests", "--bin", "paddock-probe"]))?;
    let probe = target_dir(root).join("release/paddock-probe");
    let dir = std::env::temp_dir().join(format!("paddock-bench-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let result = measure(&paddock, &probe, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure(paddock: &Path, probe: &Path, dir: &Path) -> Result<()> {
    let sock = dir.join("s.sock");
    let listener = UnixListener::bind(&sock)?;
    std::thread::spawn(move || for _ in listener.incoming() {});
    let arg = format!("unix-time:{},{CONNECTS}", sock.display());
    let inside = |flag: &str, value: Option<&Path>| -> Result<f64> {
        let mut c = Command::new(paddock);
        c.current_dir(dir).args(["run", "--itemize", "off", flag]);
        if let Some(v) = value {
            c.arg(v);
        }
        let out = c.arg("--").arg(probe).arg(&arg).output().context("cannot run paddock")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let ns = text
            .split("ns=")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .and_then(|t| t.parse::<f64>().ok());
        match ns {
            Some(ns) if out.status.success() => Ok(ns / 1000.0),
            _ => bail!("the probe failed: {out:?}"),
        }
    };
    let outside = || -> Result<f64> {
        let t = Instant::now();
        for _ in 0..CONNECTS {
            UnixStream::connect(&sock)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / f64::from(CONNECTS))
    };
    let (mut granted, mut plain, mut host) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        granted.push(inside("--allow-unix-socket", Some(&sock))?);
        plain.push(inside("--allow-unix-sockets", None)?);
        host.push(outside()?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (g, p, h) = (median(&mut granted), median(&mut plain), median(&mut host));
    println!(
        "unix socket connect (socket + connect + close), median of {ROUNDS} runs of {CONNECTS}:"
    );
    println!("  granted by path (supervisor connects): {g:8.1} us");
    println!("  all unix sockets allowed (plain):      {p:8.1} us");
    println!("  outside any sandbox:                   {h:8.1} us");
    println!("  cost of a granted connect:             {:+8.1} us ({:.1}x)", g - p, g / p);
    Ok(())
}
