//! Helpers every layer may use (tests/it/layering.rs): small, pure or nearly so, and
//! naming no other module of sluice.

pub mod timefmt;
