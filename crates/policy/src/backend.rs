//! The `Backend` trait: a policy in, a spawn plan out.
//!
//! Design note: `plan` is pure. It gets the resolved policy, the task and the host facts
//! the platform crate's probe collected, and returns data. Performing the plan (spawning,
//! creating placeholders, starting bridges) is the CLI's `exec` module's job alone, so a
//! plan can be printed, snapshot-tested and reviewed on any OS.

use crate::error::Error;
use crate::plan::{HostFacts, SpawnPlan, Task};
use crate::resolved::ResolvedPolicy;

/// A sandboxing mechanism that can enforce a [`ResolvedPolicy`].
pub trait Backend {
    /// The backend's name as the CLI spells it (`linux-bwrap`, `macos-seatbelt`).
    fn name(&self) -> &'static str;

    /// Turns a policy and a task into a plan, or refuses with the reason and the fix. A
    /// backend that cannot enforce part of the policy refuses; it never plans weaker walls
    /// unless the policy allows it (`weaker-when-nested`), and then it says so in the
    /// plan's diagnostics.
    fn plan(
        &self,
        policy: &ResolvedPolicy,
        task: &Task,
        facts: &HostFacts,
    ) -> Result<SpawnPlan, Error>;
}
