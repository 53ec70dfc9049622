//! ozctl: the engineers' CLI for oz (also `kubectl oz`, installed as `kubectl-oz`). The logic
//! lives in `oz::cli`.

fn main() -> std::process::ExitCode {
    oz::cli::main()
}
