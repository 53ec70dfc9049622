//! Starts a control plane, prints `PID <pid> DIR <work dir>` and waits to be killed. The orphan
//! test kills this process with SIGKILL to check the control plane does not outlive it.

fn main() {
    let plane = oz_testenv::ControlPlane::start(oz_testenv::ControlPlaneOptions::empty())
        .unwrap_or_else(|e| panic!("{e}"));
    println!("PID {} DIR {}", plane.pid(), plane.work_dir().display());
    std::thread::sleep(std::time::Duration::from_secs(600));
}
