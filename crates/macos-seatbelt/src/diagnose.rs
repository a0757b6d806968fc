//! What a failed `sandbox-exec` means, in the user's terms. Pure, so the wording is tested on
//! every OS; the macOS probe (`macos::probe`) feeds it.

use crate::error::Error;

/// The verdict on running `sandbox-exec -p '(version 1)(allow default)' /usr/bin/true`:
/// `Ok` if it succeeded; [`Error::Nested`] when macOS refused to apply a sandbox because the
/// process already runs in one (`sandbox_apply: Operation not permitted`, exit 71); else
/// [`Error::ProbeFailed`] with the status and stderr.
pub fn probe_verdict(success: bool, status: &str, stderr: &str) -> Result<(), Error> {
    if success {
        return Ok(());
    }
    if stderr.contains("sandbox_apply") {
        return Err(Error::Nested { stderr: stderr.to_owned() });
    }
    Err(Error::ProbeFailed { status: status.to_owned(), stderr: stderr.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn nested_sandbox_is_named() {
        let err = probe_verdict(
            false,
            "exit status: 71",
            "sandbox-exec: sandbox_apply: Operation not permitted\n",
        )
        .unwrap_err();
        expect![[r#"
            this process already runs inside a macOS sandbox, and macOS cannot apply a sandbox inside a sandbox (sandbox_apply: Operation not permitted); run paddock from an unsandboxed shell:
              | sandbox-exec: sandbox_apply: Operation not permitted"#]]
        .assert_eq(&err.to_string());
    }

    #[test]
    fn other_failures_keep_status_and_stderr() {
        let err = probe_verdict(false, "exit status: 65", "sandbox-exec: unbound variable: x\n")
            .unwrap_err();
        expect![[r#"
            sandbox-exec could not apply a trivial profile (exit status: 65):
              | sandbox-exec: unbound variable: x"#]]
        .assert_eq(&err.to_string());
        assert!(probe_verdict(true, "exit status: 0", "").is_ok());
    }
}
