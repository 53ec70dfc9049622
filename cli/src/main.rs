//! ozctl: the engineers' CLI for oz (also `kubectl oz`, installed as `kubectl-oz`). The logic
//! lives in the `ozctl` library.

fn main() -> std::process::ExitCode {
    // Read here, in the binary, not in the library: cargo recompiles whatever reads the
    // variable when it changes, and a new commit should relink ozctl, not rebuild its library.
    ozctl::main(option_env!("OZ_GIT_COMMIT"))
}
