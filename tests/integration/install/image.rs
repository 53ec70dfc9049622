//! The image `make image` builds, as shipped: `target/image/oz.oci.tar`. Its config says who it
//! runs as, what it runs and which ports it serves; its files are a static oz-manager, a static
//! secretreader plugin (a fleet hub's), the CA certificates, the time zones and a passwd naming
//! its user; and its own oz-manager, run from the unpacked archive (static, it runs here as it
//! would in a pod) with the generated install's flags and RBAC, grants alice an exec and revokes
//! it at expiry.
//!
//! Without the archive these tests pass with a note, so that `make test` needs no `make image`
//! first; `.ci/run` builds the image and sets `OZ_IMAGE_TEST=1`, which makes a missing archive a
//! failure.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    time::Duration,
};

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use oz::install::{
    HEALTH_PORT, METRICS_PORT, RUN_AS, SESSIONS_PORT, WEBHOOK_PORT, fleet_hub::SECRETREADER_PLUGIN,
};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::workloads::{self, WorkloadSpec};
use serde_json::{Value, json};

use crate::{
    install::versions::version_commit,
    support::{
        cluster::env,
        install::{
            ScopedInstall, TEMPLATE, operator_args, service_account_kubeconfig, wait_for_ready,
        },
        manifests::create_manifest,
        operator::Operator,
        polling::eventually,
        users::can_exec,
    },
};

/// Set by CI: the image must have been built.
const REQUIRED: &str = "OZ_IMAGE_TEST";
/// Where the image puts oz-manager, its entrypoint.
const ENTRYPOINT: &str = "/usr/local/bin/oz-manager";

/// The image, unpacked.
struct Image {
    /// The name the archive tags it with (`oz:VERSION`).
    reference: String,
    /// Its OCI config.
    config: Value,
    /// Its layers, extracted in order.
    rootfs: PathBuf,
}

/// The image, unpacked once per run; `None` (with a note) when it was not built and need not be.
fn image() -> Option<&'static Image> {
    static IMAGE: OnceLock<Option<Image>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/image/oz.oci.tar");
            if archive.exists() {
                return Some(unpack(&archive));
            }
            assert!(
                std::env::var_os(REQUIRED).is_none(),
                "{REQUIRED} is set, and there is no {}: run `make image`",
                archive.display()
            );
            eprintln!(
                "note: no {}, so the image is not tested (`make image` builds it; {REQUIRED}=1 makes this a failure)",
                archive.display()
            );
            None
        })
        .as_ref()
}

/// Unpacks the OCI archive `archive` into this run's temporary directory.
fn unpack(archive: &Path) -> Image {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("image-{}", std::process::id()));
    let (layout, rootfs) = (dir.join("layout"), dir.join("rootfs"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&layout).unwrap();
    std::fs::create_dir_all(&rootfs).unwrap();
    untar(archive, &layout);
    let blob = |descriptor: &Value| {
        let digest = descriptor["digest"]
            .as_str()
            .expect("a descriptor's digest");
        layout.join("blobs").join(digest.replace(':', "/"))
    };
    let read_json = |path: PathBuf| -> Value {
        serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let index = read_json(layout.join("index.json"));
    let descriptors = index["manifests"]
        .as_array()
        .expect("index.json's manifests");
    assert_eq!(descriptors.len(), 1, "one image in the archive: {index}");
    let manifest = read_json(blob(&descriptors[0]));
    for layer in manifest["layers"]
        .as_array()
        .expect("the manifest's layers")
    {
        untar(&blob(layer), &rootfs);
    }
    Image {
        reference: descriptors[0]["annotations"]["org.opencontainers.image.ref.name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        config: read_json(blob(&manifest["config"])),
        rootfs,
    }
}

/// Extracts the tar file `archive` into `into` (GNU tar recognises a gzipped layer by itself).
fn untar(archive: &Path, into: &Path) {
    let status = Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success(), "tar -xf {}", archive.display());
}

/// Whether the ELF executable `path` names no program interpreter: it is statically linked, and
/// runs without the libc the image does not have.
fn is_static_executable(path: &Path) -> bool {
    const PT_INTERP: u32 = 3;
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; an image built before it was added? Build it again with `make image`",
            path.display()
        )
    });
    assert!(
        bytes.starts_with(b"\x7fELF\x02\x01"),
        "{}: a little-endian 64-bit ELF file",
        path.display()
    );
    let number = |offset: usize, width: usize| {
        let mut le = [0u8; 8];
        le[..width].copy_from_slice(&bytes[offset..offset + width]);
        u64::from_le_bytes(le) as usize
    };
    // The program headers: their offset, each one's size, and how many (the ELF64 header).
    let (headers, size, count) = (number(0x20, 8), number(0x36, 2), number(0x38, 2));
    (0..count).all(|i| number(headers + i * size, 4) != PT_INTERP as usize)
}

#[test]
fn the_image_runs_oz_manager_as_user_65532_and_exposes_every_port_it_serves() {
    let Some(image) = image() else { return };
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(image.reference, format!("oz:{version}"));
    let config = &image.config["config"];
    assert_eq!(config["User"], format!("{RUN_AS}:{RUN_AS}"));
    assert_eq!(config["Entrypoint"], json!([ENTRYPOINT]));
    assert_eq!(
        config["Labels"]["org.opencontainers.image.version"],
        version
    );
    let exposed: BTreeSet<String> = config["ExposedPorts"]
        .as_object()
        .expect("the config's ExposedPorts")
        .keys()
        .cloned()
        .collect();
    let served: BTreeSet<String> = [
        METRICS_PORT,
        HEALTH_PORT,
        WEBHOOK_PORT,
        i32::from(SESSIONS_PORT),
    ]
    .iter()
    .map(|port| format!("{port}/tcp"))
    .collect();
    assert_eq!(exposed, served);

    let file = |path: &str| image.rootfs.join(path.trim_start_matches('/'));
    assert!(is_static_executable(&file(ENTRYPOINT)));
    // The fleet hub's credential plugin, where the hub's provider file names it.
    assert!(is_static_executable(&file(SECRETREADER_PLUGIN)));
    let certificates = std::fs::read_to_string(file("/etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(
        certificates.matches("BEGIN CERTIFICATE").count() > 100,
        "the image's CA bundle is not Debian's"
    );
    assert!(file("/usr/share/zoneinfo/Europe/Berlin").is_file());
    let passwd = std::fs::read_to_string(file("/etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with(&format!("nonroot:x:{RUN_AS}:{RUN_AS}:"))),
        "{passwd}"
    );
    assert!(
        !file("/bin/sh").exists() && !file("/usr/bin").exists(),
        "no shell and no other programs"
    );
}

#[tokio::test]
async fn the_images_oz_manager_grants_alice_an_exec_and_revokes_it_at_expiry() {
    let Some(image) = image() else { return };
    let oz_manager = image.rootfs.join(ENTRYPOINT.trim_start_matches('/'));
    let commit = version_commit(&oz_manager, "oz-manager");
    assert_ne!(commit, "unknown", "make image names the commit it builds");

    let ScopedInstall {
        admin,
        operator_ns,
        ns,
        yaml,
        ..
    } = ScopedInstall::apply("image").await;
    let kubeconfig = service_account_kubeconfig(env(), &admin, &operator_ns, "oz-manager").await;
    workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, TEMPLATE).await.unwrap();
    let args = operator_args(&yaml, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let operator = Operator::builder(&ns)
        .binary(&oz_manager)
        .kubeconfig(&kubeconfig)
        .args(&args)
        .start();

    create_manifest(
        &admin,
        &ns,
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\n\
         metadata: {name: alice-short}\nspec:\n  templateName: web-exec\n  duration: 8s\n  \
         requester: {username: alice, groups: [devs, system:authenticated]}\n",
    )
    .await
    .unwrap();
    let pod = wait_for_ready(&admin, &ns, "alice-short", &operator).await;
    assert!(can_exec("alice", &ns, &pod).await, "alice may exec");
    assert!(!can_exec("bob", &ns, &pod).await, "bob may not");

    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    let expires_at = requests
        .get("alice-short")
        .await
        .unwrap()
        .status
        .unwrap()
        .expires_at
        .unwrap()
        .0;
    eventually(
        Duration::from_secs(30),
        &format!("alice's access to end (log: {})", operator.log.display()),
        || {
            let (ns, pod) = (ns.clone(), pod.clone());
            async move { (!can_exec("alice", &ns, &pod).await).then_some(()) }
        },
    )
    .await;
    assert!(
        Timestamp::now() >= expires_at,
        "access ended at expiry, not before"
    );
    eventually(
        Duration::from_secs(30),
        &format!(
            "alice-short to be Expired (log: {})",
            operator.log.display()
        ),
        || {
            let requests = requests.clone();
            async move {
                let phase = requests.get("alice-short").await.ok()?.status?.phase;
                (phase == Some(RequestPhase::Expired)).then_some(())
            }
        },
    )
    .await;
}
