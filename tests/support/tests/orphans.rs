//! A test run killed with SIGKILL must leave no kube-apiserver or etcd behind.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

#[test]
fn a_killed_parent_leaves_no_control_plane_behind() {
    let mut parent = Command::new(env!("CARGO_BIN_EXE_hold-control-plane"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (pid, work_dir) = match fields.as_slice() {
        ["PID", pid, "DIR", dir] => (pid.to_string(), dir.to_string()),
        _ => panic!("unexpected output from hold-control-plane: {line:?}"),
    };
    let proc_entry = format!("/proc/{pid}");
    assert!(
        Path::new(&proc_entry).exists(),
        "the control plane should be running"
    );

    parent.kill().unwrap(); // SIGKILL: no destructor, no cleanup code runs in the parent.
    parent.wait().unwrap();

    let deadline = Instant::now() + Duration::from_secs(15);
    while Path::new(&proc_entry).exists() && !is_zombie(&proc_entry) {
        assert!(
            Instant::now() < deadline,
            "kube-testenv (pid {pid}) outlived its killed parent"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!Path::new(&work_dir).exists(), "{work_dir} was left behind");
}

// An exited child of a killed parent is reparented and reaped by init; until then it is a zombie,
// which holds no resources.
fn is_zombie(proc_entry: &str) -> bool {
    std::fs::read_to_string(format!("{proc_entry}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}
