//! The cluster side (kube-rs): the platform's custom resource types and, in later modules,
//! workspace lifecycle, pods, events, snapshots, GPU capacity and the cleanup ledger.

pub mod attempts;
pub mod crd;
pub mod doctor;
pub mod gpu;
pub mod idempotent;
pub mod idle;
pub mod janitor;
pub mod ledger;
pub mod rbac;
pub mod retry;
pub mod snapshot_storage;
pub mod snapshots;
pub mod squeeze;
pub mod status;
pub mod taint;
pub mod target;
pub mod wait;
pub mod workspace;
