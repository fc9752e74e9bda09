//! The `%`-format engine shared by squeue, sinfo and sacct (stub: being written).
