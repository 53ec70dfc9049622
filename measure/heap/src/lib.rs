//! Heap accounting without a cluster: each program in `src/bin/` installs the counting
//! allocator as its global allocator and prints the bytes a cache holds per grant.

pub mod counting_alloc;
