//! Where recordings are kept: a directory, or an S3 bucket, behind `object_store`. Keys are
//! relative to the store's prefix: `<namespace>/<id>.cast` once finished, and
//! `<namespace>/<id>/part-NNNNNNNN.cast` while the session runs.

use std::{path::PathBuf, sync::Arc};

use bytes::Bytes;
use futures::{TryStreamExt, stream::BoxStream};
use object_store::{
    ObjectStore, PutPayload, aws::AmazonS3Builder, aws::AmazonS3ConfigKey, local::LocalFileSystem,
    path::Path,
};

use super::{RecordingDigest, RecordingError, unrecorded::hex};

/// An opened store and the prefix every key goes under.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    inner: Arc<dyn ObjectStore>,
    prefix: String,
    /// The directory, for a directory store.
    dir: Option<PathBuf>,
    /// The URL it was opened from, without its query (which may hold credentials).
    pub(crate) display: String,
}

/// The S3 options that are credentials: never in a URL that a Pod's arguments show.
const CREDENTIAL_OPTIONS: [AmazonS3ConfigKey; 3] = [
    AmazonS3ConfigKey::AccessKeyId,
    AmazonS3ConfigKey::SecretAccessKey,
    AmazonS3ConfigKey::Token,
];

/// The credential options (`access_key_id`, `secret_access_key`, `token`, under any name
/// object_store takes for them) that the query of the `s3://` URL `url` sets, or its user
/// info; empty for any other URL.
pub fn credentials_in_url(url: &str) -> Vec<String> {
    let Some(rest) = url.strip_prefix("s3://") else {
        return Vec::new();
    };
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut found: Vec<String> = query
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .filter(|key| {
            key.parse::<AmazonS3ConfigKey>()
                .is_ok_and(|key| CREDENTIAL_OPTIONS.contains(&key))
        })
        .map(String::from)
        .collect();
    if location
        .split('/')
        .next()
        .is_some_and(|host| host.contains('@'))
    {
        found.push("user info (KEY:SECRET@)".into());
    }
    found
}

/// The finished recording's key.
pub(crate) fn final_key(namespace: &str, id: &str) -> String {
    format!("{namespace}/{id}.cast")
}

/// The folder of a running session's parts.
fn parts_dir(namespace: &str, id: &str) -> String {
    format!("{namespace}/{id}")
}

/// The key of a running session's part `n` (from 1).
pub(crate) fn part_key(namespace: &str, id: &str, n: u32) -> String {
    format!("{}/part-{n:08}.cast", parts_dir(namespace, id))
}

impl Store {
    /// Opens `url`: `s3://bucket[/prefix][?option=value&...]` (options as object_store's
    /// `AmazonS3ConfigKey` names them: `endpoint`, `region`, `access_key_id`,
    /// `secret_access_key`, `allow_http`, ...; the `AWS_*` environment fills in the rest), or
    /// `file:///dir`, or a plain directory path (created if missing).
    pub(crate) fn open(url: &str) -> Result<Self, RecordingError> {
        let bad = |reason: String| RecordingError::Config {
            url: redact(url),
            reason,
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
            let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket named".into()));
            }
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
                let key: AmazonS3ConfigKey = key
                    .parse()
                    .map_err(|_| bad(format!("unknown S3 option {key:?}")))?;
                builder = builder.with_config(key, percent_decode(value));
            }
            let inner = builder.build().map_err(|e| bad(e.to_string()))?;
            return Ok(Self {
                inner: Arc::new(inner),
                prefix: prefix.trim_matches('/').to_owned(),
                dir: None,
                display: format!("s3://{location}"),
            });
        }
        let dir = url.strip_prefix("file://").unwrap_or(url);
        if dir.is_empty() {
            return Err(bad("no directory named".into()));
        }
        std::fs::create_dir_all(dir).map_err(|e| bad(format!("cannot create it: {e}")))?;
        let inner = LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| bad(e.to_string()))?
            // Deleting a finished session's parts removes their directory too.
            .with_automatic_cleanup(true);
        Ok(Self {
            inner: Arc::new(inner),
            prefix: String::new(),
            dir: Some(PathBuf::from(dir)),
            display: dir.to_owned(),
        })
    }

    fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{key}", self.prefix))
        }
    }

    pub(crate) async fn put(&self, key: &str, bytes: bytes::Bytes) -> object_store::Result<()> {
        self.inner
            .put(&self.path(key), PutPayload::from(bytes))
            .await
            .map(drop)
    }

    /// The object's bytes, `None` when there is none. Only for parts, which are small.
    pub(crate) async fn get(&self, key: &str) -> object_store::Result<Option<Bytes>> {
        match self.inner.get(&self.path(key)).await {
            Ok(result) => Ok(Some(result.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The object's bytes as they are read, `None` when there is none.
    pub(crate) async fn get_stream(
        &self,
        key: &str,
    ) -> object_store::Result<Option<BoxStream<'static, object_store::Result<Bytes>>>> {
        match self.inner.get(&self.path(key)).await {
            Ok(result) => Ok(Some(result.into_stream())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The bytes of a directory store's files, read when oz starts so that a total cap counts
    /// what earlier runs left (an emptyDir outlives a restarted container). 0 for S3, whose
    /// size is not this pod's disk.
    pub(crate) fn used_bytes(&self) -> u64 {
        fn walk(dir: &std::path::Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return 0;
            };
            entries
                .flatten()
                .map(|entry| match entry.file_type() {
                    Ok(kind) if kind.is_dir() => walk(&entry.path()),
                    Ok(_) => entry.metadata().map_or(0, |m| m.len()),
                    Err(_) => 0,
                })
                .sum()
        }
        self.dir.as_deref().map_or(0, walk)
    }

    /// A running (or crashed) session's part keys, in order.
    pub(crate) async fn parts(
        &self,
        namespace: &str,
        id: &str,
    ) -> object_store::Result<Vec<String>> {
        let dir = self.path(&parts_dir(namespace, id));
        let mut parts: Vec<(u32, String)> = self
            .inner
            .list(Some(&dir))
            .try_filter_map(|meta| async move {
                let name = meta.location.filename().unwrap_or_default();
                let number = name
                    .strip_prefix("part-")
                    .and_then(|n| n.strip_suffix(".cast"))
                    .and_then(|n| n.parse::<u32>().ok());
                Ok(number.map(|n| (n, part_key(namespace, id, n))))
            })
            .try_collect()
            .await?;
        parts.sort();
        Ok(parts.into_iter().map(|(_, key)| key).collect())
    }

    pub(crate) async fn delete(&self, key: &str) -> object_store::Result<()> {
        match self.inner.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes `header` and then `body`'s parts (each read in turn, so a long session is never
    /// whole in memory) as the one object `key`, with a multipart upload; returns the SHA-256
    /// and length of what it wrote.
    pub(crate) async fn assemble(
        &self,
        key: &str,
        header: &str,
        parts: &[String],
    ) -> object_store::Result<RecordingDigest> {
        let upload = self.inner.put_multipart(&self.path(key)).await?;
        let mut writer = object_store::WriteMultipart::new(upload);
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let mut length = 0u64;
        let mut write = |bytes: &[u8], writer: &mut object_store::WriteMultipart| {
            digest.update(bytes);
            length += bytes.len() as u64;
            writer.write(bytes);
        };
        write(header.as_bytes(), &mut writer);
        let mut first = true;
        for part in parts {
            let Some(bytes) = self.get(part).await? else {
                continue;
            };
            let mut body = &bytes[..];
            if first {
                // The first part starts with the header written when the session opened.
                first = false;
                body = match body.iter().position(|b| *b == b'\n') {
                    Some(end) => &body[end + 1..],
                    None => &[],
                };
            }
            write(body, &mut writer);
        }
        writer.finish().await?;
        Ok(RecordingDigest {
            sha256: hex(digest.finish().as_ref()),
            bytes: length,
        })
    }
}

/// `url` without its query string or user info, which may hold credentials.
pub fn redact(url: &str) -> String {
    let url = url
        .split_once('?')
        .map_or_else(|| url.to_owned(), |(u, _)| format!("{u}?…"));
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split('/').next().and_then(|h| h.rsplit_once('@')) {
            Some((_, host)) => {
                let path = &rest[rest.find('/').unwrap_or(rest.len())..];
                format!("{scheme}://…@{host}{path}")
            }
            None => url,
        },
        None => url,
    }
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_parts_and_hide_credentials() {
        assert_eq!(
            final_key("team", "20261123-081500-k3x9qa7m"),
            "team/20261123-081500-k3x9qa7m.cast"
        );
        assert_eq!(part_key("team", "x", 12), "team/x/part-00000012.cast");
        assert_eq!(redact("s3://b/p?secret_access_key=s"), "s3://b/p?…");
        assert_eq!(redact("s3://KEY:SECRET@b/p"), "s3://…@b/p");
        assert_eq!(redact("/var/lib/oz/recordings"), "/var/lib/oz/recordings");
        assert_eq!(
            percent_decode("http%3A%2F%2F127.0.0.1%3A9000"),
            "http://127.0.0.1:9000"
        );
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
