//! The crate's one integration test binary.

// Test helpers outside `#[test]` functions panic on purpose: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Every case of the shared strace corpus, through the `denials` example's own code.
mod corpus;
// `test_data/` inputs rendered to blessed `.txt` files.
mod golden;
// Round trips and split invariance over generated input.
mod props;
