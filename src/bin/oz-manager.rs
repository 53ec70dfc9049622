//! oz-manager: oz's controllers and admission webhooks in one process. The flags and what they
//! run live in the library (`oz::manager`), where a unit test can parse them.

/// mimalloc, not the C library's malloc. oz-manager holds a cache entry per grant for hours,
/// allocated between the short-lived buffers of watch events and LIST pages; glibc's malloc
/// kept much of the freed space (docs/benchmarks.md), and the release image's musl malloc is
/// slow on a busy heap. Without transparent huge pages, and freed pages returned at once: `oz::manager::memory`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc 3's `mi_option_purge_delay`: its place in `mi_option_e` (mimalloc.h), which
/// libmimalloc-sys does not name. The unit test checks that it is the option with mimalloc 3's
/// default of 1,000 ms, so an upgrade that moves it fails there.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Where an operator may choose another purge delay (in ms), which is then left as they set it.
const PURGE_DELAY_VARIABLE: &str = "MIMALLOC_PURGE_DELAY";

/// Has mimalloc hand a page back to the kernel as soon as its last block is freed, instead of a
/// second later (why: `oz::manager::memory`), unless [`PURGE_DELAY_VARIABLE`] is set.
fn purge_freed_pages_at_once() {
    if std::env::var_os(PURGE_DELAY_VARIABLE).is_none() {
        // SAFETY: sets one of mimalloc's option values; any value is valid for this option.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

fn main() -> std::process::ExitCode {
    purge_freed_pages_at_once();
    // Read here, in the binary, not in the library: cargo recompiles whatever reads the
    // variable when it changes, and a new commit should relink oz-manager, not rebuild oz.
    oz::manager::Command::parse_and_run(option_env!("OZ_GIT_COMMIT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_goes_from_mimallocs_second_to_none() {
        // SAFETY: reads an option value.
        let purge_delay = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os(PURGE_DELAY_VARIABLE).is_some() {
            // An operator's choice (mimalloc read it at start-up) is left as it is.
            let chosen = purge_delay();
            purge_freed_pages_at_once();
            assert_eq!(purge_delay(), chosen);
            return;
        }
        assert_eq!(purge_delay(), 1000, "mimalloc 3's default purge_delay");
        purge_freed_pages_at_once();
        assert_eq!(purge_delay(), 0);
    }
}
