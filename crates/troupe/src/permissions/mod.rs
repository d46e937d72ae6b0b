//! permissions (in progress).
