//! ozctl: the engineers' CLI for oz (also `kubectl oz`, installed as `kubectl-oz`). The logic
//! lives in the `ozctl` library.

fn main() -> std::process::ExitCode {
    ozctl::main()
}
