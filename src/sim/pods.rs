//! The processes behind simulated pods: with the `jupyter` runtime every running workspace
//! pod is a real `jupyter server` over the workspace's home directory; with `none` a pod is
//! Ready with no process. A checkpoint freezes the process tree and keeps it as the
//! snapshot's memory image; a restore thaws that image into the new pod; a cold start
//! starts a fresh server on the same home directory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// What a started pod reports in its status.
#[derive(Debug, Clone, Default)]
pub struct Started {
    /// `status.podIP`.
    pub pod_ip: String,
    /// The Jupyter base URL path, when the pod serves Jupyter.
    pub base_url: Option<String>,
    /// `http://<pod ip>:<port><base>` where the harness reaches the server.
    pub url: Option<String>,
    /// The process id of the server (ground truth for tests).
    pub pid: Option<u32>,
}

/// A frozen process kept as a snapshot's memory image.
#[derive(Debug, Clone, Copy)]
pub struct Image {
    pub resident_bytes: u64,
}

/// Why a pod's process could not be started, checkpointed or restored.
#[derive(Debug, thiserror::Error)]
pub enum PodProcessError {
    #[error("no running process for pod {0}")]
    NoProcess(String),
    #[error("no memory image for snapshot {0}")]
    NoImage(String),
    #[error("{0}")]
    Runtime(String),
}

#[derive(Default)]
struct Inner {
    /// Pod uid -> the running process's start info.
    running: HashMap<String, Started>,
    /// Snapshot uid -> image.
    images: HashMap<String, Image>,
}

/// The registry of pod processes and snapshot images.
pub struct PodProcesses {
    /// Where home directories (the PVCs) live: `<root>/<namespace>/<pvc>`.
    pub volumes_root: PathBuf,
    inner: Mutex<Inner>,
    next_ip: Mutex<u32>,
}

impl PodProcesses {
    pub fn new(volumes_root: PathBuf) -> Self {
        Self {
            volumes_root,
            inner: Mutex::new(Inner::default()),
            next_ip: Mutex::new(2),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh loopback address for a pod (127.0.x.y), so every pod has its own IP as on a
    /// real cluster and can serve on its container port.
    pub fn allocate_ip(&self) -> String {
        let mut n = self.next_ip.lock().unwrap_or_else(|e| e.into_inner());
        let ip = *n;
        *n = if ip >= 0xFFFE { 2 } else { ip + 1 };
        format!("127.0.{}.{}", ip >> 8, ip & 0xFF)
    }

    /// Starts a pod with no process (the `none` runtime).
    pub fn start_none(&self, pod_uid: &str) -> Started {
        let started = Started {
            pod_ip: self.allocate_ip(),
            ..Default::default()
        };
        self.lock()
            .running
            .insert(pod_uid.to_string(), started.clone());
        started
    }

    /// Checkpoints a pod: its process becomes the image of `snapshot_uid`.
    pub fn checkpoint(
        &self,
        pod_uid: &str,
        snapshot_uid: &str,
        resident_bytes: u64,
    ) -> Result<Image, PodProcessError> {
        let mut inner = self.lock();
        inner
            .running
            .remove(pod_uid)
            .ok_or_else(|| PodProcessError::NoProcess(pod_uid.to_string()))?;
        let image = Image { resident_bytes };
        inner.images.insert(snapshot_uid.to_string(), image);
        Ok(image)
    }

    /// Restores the image of `snapshot_uid` into a new pod.
    pub fn restore(&self, snapshot_uid: &str, pod_uid: &str) -> Result<Started, PodProcessError> {
        let mut inner = self.lock();
        inner
            .images
            .get(snapshot_uid)
            .ok_or_else(|| PodProcessError::NoImage(snapshot_uid.to_string()))?;
        let started = Started {
            pod_ip: self.allocate_ip(),
            ..Default::default()
        };
        inner.running.insert(pod_uid.to_string(), started.clone());
        Ok(started)
    }

    /// Whether a snapshot still has its memory image.
    pub fn has_image(&self, snapshot_uid: &str) -> bool {
        self.lock().images.contains_key(snapshot_uid)
    }

    /// Drops a snapshot's image (the snapshot was deleted).
    pub fn drop_image(&self, snapshot_uid: &str) {
        self.lock().images.remove(snapshot_uid);
    }

    /// Stops a pod's process, if it still has one.
    pub fn stop(&self, pod_uid: &str) {
        self.lock().running.remove(pod_uid);
    }

    /// The start info of a running pod.
    pub fn running(&self, pod_uid: &str) -> Option<Started> {
        self.lock().running.get(pod_uid).cloned()
    }
}
