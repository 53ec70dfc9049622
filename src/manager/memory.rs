//! How oz-manager's freed memory goes back to the kernel: two settings made first thing in
//! `main`. oz's heap is many small cache entries, with the freed room of LIST pages, watch
//! events and reconciles between them.
//!
//! - **No transparent huge pages** ([`turn_off_huge_pages`]). mimalloc asks the kernel for huge
//!   pages (`madvise(MADV_HUGEPAGE)`) on the regions it maps, and on a host whose THP setting is
//!   `madvise` (the default of most distributions) or `always`, each then becomes resident 2 MiB
//!   at a time, however little of it is in use (what that cost is in docs/benchmarks.md). Two
//!   switches,
//!   because either alone leaves some: mimalloc is built with `no_thp` (Cargo.toml), so it never
//!   asks, which covers what it maps before `main` on a `madvise` host; and the kernel's
//!   per-process flag covers an `always` host from then on (the kernel checks it at each page
//!   fault, so memory already mapped is covered too; pages already faulted in stay as they are).
//! - **Freed pages returned at once** (`purge_freed_pages_at_once` in `src/bin/oz-manager.rs`,
//!   where the allocator is chosen: it sets an option through mimalloc's C API, and this crate
//!   forbids unsafe code). mimalloc 3 keeps a page whose blocks are all freed for a second
//!   before it hands it back (`purge_delay`, 1,000 ms). A restart frees most of what it
//!   allocates within that second, over and over: the LIST pages, the parsed copies the caches
//!   clone from, the start-up reconciles: the live heap barely rises during a restart while the
//!   RSS did, by the freed pages held back. Without the delay the restart's peak falls and
//!   nothing else moves (docs/benchmarks.md).

/// Turns transparent huge pages off for this process and the processes it starts.
#[cfg(target_os = "linux")]
pub fn turn_off_huge_pages() -> std::io::Result<()> {
    rustix::thread::disable_transparent_huge_pages(true).map_err(std::io::Error::from)
}

/// Elsewhere there is nothing to turn off.
#[cfg(not(target_os = "linux"))]
pub fn turn_off_huge_pages() -> std::io::Result<()> {
    Ok(())
}
