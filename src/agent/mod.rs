//! The node agent (cf. slurmd).
