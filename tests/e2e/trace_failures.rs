//! When the tracer itself fails or cannot follow the task: the task still runs, and the
//! output says why its denials are not itemized.
