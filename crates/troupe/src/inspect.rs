//! Read-only views of a workspace (in progress).
