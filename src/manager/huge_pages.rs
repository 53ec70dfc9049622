//! Transparent huge pages off for oz-manager's own memory.
//!
//! mimalloc asks the kernel for huge pages (`madvise(MADV_HUGEPAGE)`) on the regions it maps,
//! and on a host whose THP setting is `madvise` (the default of most distributions) or
//! `always`, each then becomes resident 2 MiB at a time, however little of it is in use. oz's
//! heap is many small cache entries, with the freed room of LIST pages and reconciles between
//! them, so most of those 2 MiB pages were partly empty. Measured by oz-bench (`--only scale
//! --scale-points 10000x100`), with them and without: idle 42.8 → 28.3 MiB, at 10,000 grants
//! 100.3 → 81.2 MiB, and the peak during a restart at 10,000 148.7 → 111.0 MiB.
//!
//! Two switches, because either alone leaves some: mimalloc is built with `no_thp` (Cargo.toml),
//! so it never asks, which covers what it maps before `main` on a `madvise` host; and
//! [`turn_off`], first thing in `main`, sets the kernel's per-process flag, which covers an
//! `always` host from then on (the kernel checks it at each page fault, so memory already
//! mapped is covered too; pages already faulted in stay as they are).

/// Turns transparent huge pages off for this process and the processes it starts.
#[cfg(target_os = "linux")]
pub fn turn_off() -> std::io::Result<()> {
    rustix::thread::disable_transparent_huge_pages(true).map_err(std::io::Error::from)
}

/// Elsewhere there is nothing to turn off.
#[cfg(not(target_os = "linux"))]
pub fn turn_off() -> std::io::Result<()> {
    Ok(())
}
