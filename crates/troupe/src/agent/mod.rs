//! agent (in progress).
