//! Prewarmed sandboxes (`SandboxBuilder::prewarm`): each task runs as its own in a sandbox
//! set up ahead, sees nothing of the one before, and the warm ones go with the `Sandbox`.

use super::*;

/// Waits until `cond` holds, for at most `within`.
fn awaited(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

#[test]
fn a_prewarmed_sandbox_runs_each_task_as_its_own_and_shows_nothing_of_the_one_before() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !sandbox_here() {
        return;
    }
    let s = Scratch::new("warm");
    std::fs::create_dir_all(s.project.join("sub")).unwrap();
    let listing = s.listing();
    let sandbox = s.builder("").prewarm(2).build().unwrap();
    // Two sandboxes are set up before any task asks: two bwraps, this process's children.
    assert!(awaited(Duration::from_secs(20), || children().len() >= 2), "{:?}", children());

    // The first task: its own command, environment, working directory and streams; it
    // leaves a file in its private /tmp and a process behind.
    let out = sandbox
        .spawn(
            Command::new("sh")
                .args(["-c", "echo left > /tmp/left; setsid sleep 60 & echo \"$FIRST\"; pwd; cat secrets/secret-1; echo err >&2; exit 3"])
                .env("FIRST", "one")
                .current_dir("sub")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.report.exit_code, 3, "{:?} {stdout}", out.report);
    assert!(stdout.starts_with(&format!("one\n{}\n", s.project.join("sub").display())), "{stdout}");
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().last(), Some("err"), "{out:?}");

    // The next task, in another warm sandbox: nothing of the first one.
    let out = sandbox
        .spawn(
            Command::new("sh")
                .args([
                    "-c",
                    "cat /tmp/left 2>/dev/null || echo no-file; echo \"first=${FIRST-unset}\"; \
                     grep -l sleep /proc/[0-9]*/comm 2>/dev/null || echo no-sleep",
                ])
                .stdout(Stdio::piped()),
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.report.exit_code, 0, "{:?}", out.report);
    assert_eq!(stdout, "no-file\nfirst=unset\nno-sleep\n", "the task before left something");

    // The timeout counts from the hand-over; the policy's walls hold.
    let started = Instant::now();
    let report = sandbox
        .spawn(
            Command::new("sleep").arg("30").stdout(Stdio::null()).timeout(Duration::from_secs(1)),
        )
        .unwrap()
        .wait()
        .unwrap();
    assert!(report.timed_out && report.exit_code == 124, "{report:?}");
    assert!(started.elapsed() < Duration::from_secs(25), "the timeout did not fire");

    // The warm ones are replaced: still two waiting.
    assert!(awaited(Duration::from_secs(20), || children().len() >= 2), "{:?}", children());
    drop(sandbox);
    assert!(children().is_empty(), "processes left: {:?}", children());
    let (live, sockets) = live_runs_and_sockets();
    assert!(live.is_empty() && sockets.is_empty(), "{live:?} {sockets:?}");
    assert_eq!(s.listing(), listing, "something left in the project");
}
