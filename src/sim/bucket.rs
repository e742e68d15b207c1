//! The simulated Cloud Storage bucket that Pod Snapshots are written to: plain files under
//! `<root>/<bucket>/<object name>`, with the real object layout (gke-pod-snapshots.md §3):
//! `<path>/<snapshot-uid>/{checkpoint.img, pages_meta.img, pages.img}` and the permission
//! probe `<path>/_perm_check`. The memory image `pages.img` is a sparse file as large as the
//! pod's resident memory, so a multi-GiB snapshot costs no disk; it appears only when the
//! upload completes, after the two small files.
//!
//! [`Bucket::list`] answers the GCS-JSON-style listing the API server serves at
//! `GET /storage/v1/b/<bucket>/o`.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

/// The small files a checkpoint writes first, and the memory image it writes last.
pub const CHECKPOINT_IMG: &str = "checkpoint.img";
pub const PAGES_META_IMG: &str = "pages_meta.img";
pub const PAGES_IMG: &str = "pages.img";
/// The probe object a policy writes under its storage path.
pub const PERM_CHECK: &str = "_perm_check";

/// Why a bucket operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error("cannot write {object} in bucket {bucket}")]
    Write {
        bucket: String,
        object: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot delete {prefix} in bucket {bucket}")]
    Delete {
        bucket: String,
        prefix: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot list bucket {bucket}")]
    List {
        bucket: String,
        #[source]
        source: io::Error,
    },
    #[error("the specified bucket {0} does not exist")]
    NoSuchBucket(String),
    #[error("invalid bucket or object name {0:?}")]
    InvalidName(String),
}

/// Where in a bucket one snapshot's objects live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotLocation {
    pub bucket: String,
    /// The storage config's child directory; may be empty.
    pub path: String,
    pub snapshot_uid: String,
}

impl SnapshotLocation {
    /// `<path>/<snapshot-uid>/` (no leading slash).
    pub fn prefix(&self) -> String {
        join(&self.path, &format!("{}/", self.snapshot_uid))
    }

    /// `gs://<bucket>/<path>/<snapshot-uid>/`, for messages.
    pub fn url(&self) -> String {
        format!("gs://{}/{}", self.bucket, self.prefix())
    }
}

fn join(path: &str, rest: &str) -> String {
    let path = path.trim_matches('/');
    if path.is_empty() {
        rest.to_string()
    } else {
        format!("{path}/{rest}")
    }
}

/// One object as a listing reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub name: String,
    pub size: u64,
    pub updated: DateTime<Utc>,
}

/// A listing page: objects and, with a delimiter, the "directories" below the prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub items: Vec<ObjectInfo>,
    pub prefixes: Vec<String>,
    pub next_page_token: Option<String>,
}

/// The local bucket store. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Bucket {
    root: PathBuf,
}

/// Bucket and object names must stay inside the root: no `..`, no absolute paths.
fn safe(name: &str) -> Result<&str, BucketError> {
    let ok = !name.is_empty()
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(name)
    } else {
        Err(BucketError::InvalidName(name.to_string()))
    }
}

impl Bucket {
    /// A bucket store rooted at `root` (created on first write).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The directory holding every bucket.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a bucket (an empty directory) if it does not exist yet.
    pub fn ensure(&self, bucket: &str) -> Result<(), BucketError> {
        fs::create_dir_all(self.bucket_dir(bucket)?).map_err(|source| BucketError::Write {
            bucket: bucket.to_string(),
            object: String::new(),
            source,
        })
    }

    fn bucket_dir(&self, bucket: &str) -> Result<PathBuf, BucketError> {
        Ok(self.root.join(safe(bucket)?))
    }

    fn write_object(
        &self,
        bucket: &str,
        object: &str,
        contents: &[u8],
        sparse_len: Option<u64>,
    ) -> Result<(), BucketError> {
        let err = |source| BucketError::Write {
            bucket: bucket.to_string(),
            object: object.to_string(),
            source,
        };
        let file = self.bucket_dir(bucket)?.join(safe(object)?);
        if let Some(dir) = file.parent() {
            fs::create_dir_all(dir).map_err(err)?;
        }
        // Write under a hidden name and rename, so a listing never sees a partial object.
        let tmp = file.with_file_name(format!(
            ".{}.partial",
            file.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("object")
        ));
        {
            let f = fs::File::create(&tmp).map_err(err)?;
            match sparse_len {
                Some(len) => f.set_len(len).map_err(err)?,
                None => io::Write::write_all(&mut &f, contents).map_err(err)?,
            }
        }
        fs::rename(&tmp, &file).map_err(err)
    }

    /// Writes the permission probe `<path>/_perm_check` (as a policy's storage check does).
    pub fn write_perm_check(&self, bucket: &str, path: &str) -> Result<(), BucketError> {
        self.write_object(
            bucket,
            &join(path, PERM_CHECK),
            b"podsnapshot permission check\n",
            None,
        )
    }

    /// The start of an upload: the small `checkpoint.img` and `pages_meta.img`.
    pub fn write_checkpoint_start(
        &self,
        loc: &SnapshotLocation,
        description: &Value,
    ) -> Result<(), BucketError> {
        let prefix = loc.prefix();
        let meta = serde_json::to_vec_pretty(description).unwrap_or_default();
        self.write_object(
            &loc.bucket,
            &format!("{prefix}{CHECKPOINT_IMG}"),
            &meta,
            None,
        )?;
        // A page map: one line per 2 MiB region would be real; a small fixed header will do.
        self.write_object(
            &loc.bucket,
            &format!("{prefix}{PAGES_META_IMG}"),
            &[0u8; 4096],
            None,
        )
    }

    /// The end of an upload: the memory image, `resident_bytes` long (sparse on disk).
    pub fn write_pages(
        &self,
        loc: &SnapshotLocation,
        resident_bytes: u64,
    ) -> Result<(), BucketError> {
        self.write_object(
            &loc.bucket,
            &format!("{}{PAGES_IMG}", loc.prefix()),
            &[],
            Some(resident_bytes),
        )
    }

    /// Deletes a snapshot's objects (the whole `<path>/<uid>/` prefix). Missing is fine.
    pub fn delete_snapshot(&self, loc: &SnapshotLocation) -> Result<(), BucketError> {
        let prefix = loc.prefix();
        let dir = self
            .bucket_dir(&loc.bucket)?
            .join(safe(prefix.trim_end_matches('/'))?);
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(BucketError::Delete {
                bucket: loc.bucket.clone(),
                prefix,
                source,
            }),
        }
    }

    /// Every object under `prefix`, sorted by name.
    pub fn objects(&self, bucket: &str, prefix: &str) -> Result<Vec<ObjectInfo>, BucketError> {
        let dir = self.bucket_dir(bucket)?;
        if !dir.is_dir() {
            return Err(BucketError::NoSuchBucket(bucket.to_string()));
        }
        let err = |source| BucketError::List {
            bucket: bucket.to_string(),
            source,
        };
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            let entries = match fs::read_dir(&d) {
                Ok(e) => e,
                // Deleted while we walk: nothing there any more.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(err(e)),
            };
            for entry in entries {
                let entry = entry.map_err(err)?;
                let file_name = entry.file_name();
                let Some(file_name) = file_name.to_str() else {
                    continue;
                };
                if file_name.starts_with('.') {
                    continue;
                }
                let Ok(md) = entry.metadata() else { continue };
                if md.is_dir() {
                    stack.push(entry.path());
                    continue;
                }
                let Ok(rel) = entry.path().strip_prefix(&dir).map(Path::to_path_buf) else {
                    continue;
                };
                let name = rel.to_string_lossy().replace('\\', "/");
                if !name.starts_with(prefix) {
                    continue;
                }
                let updated = md
                    .modified()
                    .map(DateTime::<Utc>::from)
                    .unwrap_or_else(|_| Utc::now());
                out.push(ObjectInfo {
                    name,
                    size: md.len(),
                    updated,
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// A listing as `objects.list` answers it: `prefix`, optional `delimiter` (names with
    /// the delimiter after the prefix roll up into `prefixes`), `max_results` per page and
    /// the `page_token` of the previous page (the last name it returned).
    pub fn list(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        max_results: Option<usize>,
        page_token: Option<&str>,
    ) -> Result<Listing, BucketError> {
        let mut listing = Listing::default();
        let max = max_results.filter(|m| *m > 0).unwrap_or(1000);
        let mut entries: Vec<(String, Option<ObjectInfo>)> = Vec::new();
        for o in self.objects(bucket, prefix)? {
            let rest = &o.name[prefix.len()..];
            match delimiter.filter(|d| !d.is_empty()).and_then(|d| {
                rest.find(d)
                    .map(|i| format!("{prefix}{}", &rest[..i + d.len()]))
            }) {
                Some(p) => {
                    if entries.last().is_none_or(|(k, _)| *k != p) {
                        entries.push((p, None));
                    }
                }
                None => entries.push((o.name.clone(), Some(o))),
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        let start = page_token.map_or(0, |t| entries.partition_point(|(k, _)| k.as_str() <= t));
        let page: Vec<_> = entries.into_iter().skip(start).collect();
        let more = page.len() > max;
        for (key, item) in page.into_iter().take(max) {
            listing.next_page_token = Some(key.clone());
            match item {
                Some(o) => listing.items.push(o),
                None => listing.prefixes.push(key),
            }
        }
        if !more {
            listing.next_page_token = None;
        }
        Ok(listing)
    }

    /// Total bytes (logical sizes) under `prefix`.
    pub fn bytes_under(&self, bucket: &str, prefix: &str) -> u64 {
        self.objects(bucket, prefix)
            .map(|os| os.iter().map(|o| o.size).sum())
            .unwrap_or(0)
    }
}

/// The JSON body of `GET /storage/v1/b/<bucket>/o`, as the GCS JSON API writes it.
pub fn listing_json(bucket: &str, listing: &Listing) -> Value {
    let items: Vec<Value> = listing
        .items
        .iter()
        .map(|o| {
            let updated = o.updated.to_rfc3339_opts(SecondsFormat::Millis, true);
            json!({
                "kind": "storage#object",
                "id": format!("{bucket}/{}", o.name),
                "name": o.name,
                "bucket": bucket,
                "size": o.size.to_string(),
                "contentType": "application/octet-stream",
                "storageClass": "STANDARD",
                "timeCreated": updated,
                "updated": updated,
            })
        })
        .collect();
    let mut body = json!({"kind": "storage#objects"});
    if !items.is_empty() {
        body["items"] = json!(items);
    }
    if !listing.prefixes.is_empty() {
        body["prefixes"] = json!(listing.prefixes);
    }
    if let Some(t) = &listing.next_page_token {
        body["nextPageToken"] = json!(t);
    }
    body
}

/// A GCS-JSON-style error body.
pub fn error_json(code: u16, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "errors": [{"message": message, "domain": "global", "reason": if code == 404 { "notFound" } else { "invalid" }}]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(uid: &str) -> SnapshotLocation {
        SnapshotLocation {
            bucket: "b".into(),
            path: "kubeflow-notebooks".into(),
            snapshot_uid: uid.into(),
        }
    }

    #[test]
    fn snapshot_objects_have_the_real_layout_and_the_image_is_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let b = Bucket::new(dir.path().to_path_buf());
        b.write_perm_check("b", "kubeflow-notebooks").unwrap();
        b.write_checkpoint_start(&loc("u1"), &json!({"pod": "p"}))
            .unwrap();
        let names: Vec<_> = b
            .objects("b", "kubeflow-notebooks/u1/")
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect();
        assert_eq!(
            names,
            [
                "kubeflow-notebooks/u1/checkpoint.img",
                "kubeflow-notebooks/u1/pages_meta.img"
            ]
        );
        b.write_pages(&loc("u1"), 8 << 30).unwrap();
        let pages = dir.path().join("b/kubeflow-notebooks/u1/pages.img");
        let md = fs::metadata(&pages).unwrap();
        assert_eq!(md.len(), 8 << 30);
        use std::os::unix::fs::MetadataExt;
        assert!(md.blocks() * 512 < 1 << 20, "the image is sparse");
        assert!(b.bytes_under("b", "kubeflow-notebooks/u1/") > 8 << 30);
        b.delete_snapshot(&loc("u1")).unwrap();
        assert!(b.objects("b", "kubeflow-notebooks/u1/").unwrap().is_empty());
        assert_eq!(b.objects("b", "").unwrap().len(), 1, "_perm_check stays");
    }

    #[test]
    fn listing_pages_and_rolls_up_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let b = Bucket::new(dir.path().to_path_buf());
        for uid in ["a", "b", "c"] {
            b.write_checkpoint_start(&loc(uid), &json!({})).unwrap();
        }
        let l = b
            .list("b", "kubeflow-notebooks/", Some("/"), None, None)
            .unwrap();
        assert!(l.items.is_empty());
        assert_eq!(
            l.prefixes,
            [
                "kubeflow-notebooks/a/",
                "kubeflow-notebooks/b/",
                "kubeflow-notebooks/c/"
            ]
        );
        let p1 = b.list("b", "", None, Some(4), None).unwrap();
        assert_eq!(p1.items.len(), 4);
        let token = p1.next_page_token.clone().unwrap();
        let p2 = b.list("b", "", None, Some(4), Some(&token)).unwrap();
        assert_eq!(p2.items.len(), 2);
        assert!(p2.next_page_token.is_none());
        let body = listing_json("b", &p2);
        assert_eq!(body["kind"], "storage#objects");
        assert_eq!(body["items"][1]["size"], "4096");
        assert!(matches!(
            b.list("nope", "", None, None, None),
            Err(BucketError::NoSuchBucket(_))
        ));
        assert!(matches!(
            b.objects("../etc", ""),
            Err(BucketError::InvalidName(_))
        ));
    }
}
