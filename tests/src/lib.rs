//! Helpers shared by the end-to-end suites (the suites live in `e2e/`).
