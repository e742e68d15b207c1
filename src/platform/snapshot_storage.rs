//! Where a workspace's snapshots live in storage and what they leave there: the bucket and
//! path of the add-on's PodSnapshotStorageConfig, the objects under a snapshot's prefix
//! (`<path>/<snapshot-uid>/`, gke-pod-snapshots.md §3) through a GCS-JSON-style listing
//! where the target serves one (the simulator does, at `/storage/v1/b/<bucket>/o`; a real
//! cluster's bucket needs Google Cloud credentials, which wsgate does not use), and the hint
//! for a snapshot stuck in Deleting.

use kube::api::Api;
use serde::Deserialize;

use super::crd::PodSnapshotStorageConfig;
use super::doctor::STORAGE_CONFIG;

/// Why a snapshot hangs in Deleting, and what to check (gke-pod-snapshots.md §3).
pub const STUCK_HINT: &str = "a PodSnapshot stuck in Deleting keeps its bucket objects: its finalizer runs as the GKE service agent service-<PROJECT_NUMBER>@container-engine-robot.iam.gserviceaccount.com, which needs roles/storage.objectUser (list and delete) on the snapshot bucket; grant it, and the deletion finishes";

/// A storage config's bucket and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub bucket: String,
    /// The child directory in the bucket; may be empty.
    pub path: String,
}

impl Location {
    /// `<path>/<uid>/` (no leading slash).
    pub fn prefix(&self, snapshot_uid: &str) -> String {
        match self.path.trim_matches('/') {
            "" => format!("{snapshot_uid}/"),
            p => format!("{p}/{snapshot_uid}/"),
        }
    }

    /// `gs://<bucket>/<path>/<uid>/`, for messages.
    pub fn url(&self, snapshot_uid: &str) -> String {
        format!("gs://{}/{}", self.bucket, self.prefix(snapshot_uid))
    }
}

/// The bucket and path of the add-on's default storage config; `None` when it has none.
pub async fn location(client: &kube::Client) -> Result<Option<Location>, kube::Error> {
    let api: Api<PodSnapshotStorageConfig> = Api::all(client.clone());
    Ok(api.get_opt(STORAGE_CONFIG).await?.and_then(|c| {
        let gcs = c.spec.snapshot_storage_config.get("gcs")?;
        Some(Location {
            bucket: gcs.get("bucket")?.as_str()?.to_string(),
            path: gcs
                .get("path")
                .and_then(|p| p.as_str())
                .unwrap_or("")
                .to_string(),
        })
    }))
}

#[derive(Deserialize)]
struct Listing {
    #[serde(default)]
    items: Vec<Object>,
    #[serde(default, rename = "nextPageToken")]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct Object {
    /// GCS JSON sends sizes as decimal strings.
    size: String,
}

/// The objects under a snapshot's prefix, as `(count, bytes)`, through the GCS-JSON-style
/// listing the target serves at `/storage/v1/b/<bucket>/o`. Only the simulator serves one;
/// call it there.
pub async fn listed(
    client: &kube::Client,
    loc: &Location,
    snapshot_uid: &str,
) -> Result<(usize, u64), String> {
    let prefix = loc.prefix(snapshot_uid);
    let (mut count, mut bytes) = (0usize, 0u64);
    let mut page: Option<String> = None;
    loop {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("prefix", &prefix);
        if let Some(p) = &page {
            query.append_pair("pageToken", p);
        }
        let uri = format!("/storage/v1/b/{}/o?{}", loc.bucket, query.finish());
        let req = http::Request::get(&uri)
            .body(Vec::new())
            .map_err(|e| format!("cannot build the listing request: {e}"))?;
        let listing: Listing = client
            .request(req)
            .await
            .map_err(|e| format!("cannot list {}: {e}", loc.url(snapshot_uid)))?;
        for o in &listing.items {
            count += 1;
            bytes += o.size.parse::<u64>().unwrap_or(0);
        }
        match listing.next_page_token {
            Some(t) if !t.is_empty() => page = Some(t),
            _ => return Ok((count, bytes)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_follow_the_bucket_layout() {
        let with_path = Location {
            bucket: "b".into(),
            path: "/kubeflow-notebooks/".into(),
        };
        assert_eq!(with_path.prefix("u1"), "kubeflow-notebooks/u1/");
        assert_eq!(with_path.url("u1"), "gs://b/kubeflow-notebooks/u1/");
        let bare = Location {
            bucket: "b".into(),
            path: String::new(),
        };
        assert_eq!(bare.prefix("u1"), "u1/");
    }
}
