//! A real S3-compatible server on 127.0.0.1 for the recording tests: gofakes3's command (built
//! and cached by `hack/testenv.sh build-s3`), in memory, with one bucket. It accepts any
//! credentials; the URL it gives says path-style requests over plain http.

use std::{
    net::{Ipv4Addr, TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{Error, Result};

/// A running gofakes3, stopped (killed) on drop.
pub struct S3Server {
    child: Child,
    endpoint: String,
    bucket: String,
}

impl S3Server {
    /// Starts one with bucket `bucket` and waits until it accepts connections.
    pub fn start(bucket: &str) -> Result<Self> {
        let binary = s3_binary()?;
        // The port is found free, then taken by the child: retry if another process took it.
        let mut last = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map_err(|e| Error::Start(format!("finding a free port: {e}")))?
                .port();
            let mut child = Command::new(&binary)
                .args([
                    "-host",
                    &format!("127.0.0.1:{port}"),
                    "-backend",
                    "memory",
                    "-initialbucket",
                    bucket,
                    "-quiet",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| Error::Start(format!("running {}: {e}", binary.display())))?;
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return Ok(Self {
                        child,
                        endpoint: format!("http://127.0.0.1:{port}"),
                        bucket: bucket.to_owned(),
                    });
                }
                if let Ok(Some(status)) = child.try_wait() {
                    last = format!("gofakes3 on port {port} exited with {status}");
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Error::Timeout(format!(
                        "gofakes3 did not listen on 127.0.0.1:{port} within 30s"
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Err(Error::Start(last))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The bucket it was started with.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// A store URL for oz's recordings under `prefix`: `s3://bucket/prefix?endpoint=...` with
    /// a region, placeholder credentials and `allow_http`.
    pub fn url(&self, prefix: &str) -> String {
        format!(
            "s3://{}/{prefix}?endpoint={}&region=us-east-1&access_key_id=oz&secret_access_key=oz-secret&allow_http=true",
            self.bucket, self.endpoint
        )
    }

    /// Kills the server now (a store that has gone away).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// gofakes3: `$OZ_S3_BIN`, or what `hack/testenv.sh build-s3` prints (built once per machine,
/// like kube-testenv and kwok).
fn s3_binary() -> Result<PathBuf> {
    crate::control_plane::built("OZ_S3_BIN", "build-s3")
}
