//! oz-manager: oz's controllers and admission webhooks in one process. The flags and what they
//! run live in the library (`oz::manager`), where a unit test can parse them.

/// mimalloc, not the C library's malloc. oz-manager holds a cache entry per grant for hours,
/// allocated between the short-lived buffers of watch events and LIST pages; glibc's malloc
/// kept much of the freed space (oz-bench at 3,000 grants: 14 KB of RSS per request after a
/// restart, 10.6 KB with mimalloc), and the release image's musl malloc is slow on a busy
/// heap. Without transparent huge pages: `oz::manager::huge_pages`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    oz::manager::Command::parse_and_run()
}
