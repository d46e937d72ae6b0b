//! tools (in progress).
