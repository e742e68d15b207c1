//! The cluster side (kube-rs): the platform's custom resource types, workspace lifecycle,
//! pods, events, snapshots, GPU capacity, the cleanup ledger and the ownership rule
//! ([`ownership`]) every delete, patch and overwrite goes through.

pub mod attempts;
pub mod board;
pub mod crd;
pub mod doctor;
pub mod forward;
pub mod gpu;
pub mod idempotent;
pub mod idle;
pub mod janitor;
pub mod ledger;
pub mod names;
pub mod options;
pub mod ownership;
pub mod pause;
pub mod rbac;
pub mod retry;
pub mod snapshot_storage;
pub mod snapshots;
pub mod squeeze;
pub mod status;
pub mod taint;
pub mod target;
pub mod volume;
pub mod wait;
pub mod watched;
pub mod workspace;
