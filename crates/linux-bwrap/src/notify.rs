//! Write notifications (`--itemize observe`): the supervisor's seccomp user-notification
//! filter on write-intent calls and `connect`, and the records it sends to the runner.
