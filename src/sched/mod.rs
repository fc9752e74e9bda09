//! The scheduler core. PURE: no I/O, no clock, no randomness (DESIGN.md §3).
