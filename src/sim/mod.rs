//! The embedded simulator: a Kubernetes-API-compatible server (axum) over an in-memory
//! object store, so the harness runs its real kube-rs and Jupyter code paths with no cluster.
//!
//! The harness's layers never import this module; only the command shell (`wsgate sim`, and
//! `run`, `drill`, `doctor` and `status` when no cluster target is named) and the tests
//! start it.

pub mod admission;
pub mod api;
pub mod bucket;
pub mod calibrate;
pub mod controllers;
pub mod delay;
pub mod error;
pub mod faults;
pub mod json;
pub mod kinds;
pub mod pods;
pub mod profile;
pub mod runtime;
pub mod seed;
pub mod selector;
pub mod server;
pub mod store;
pub mod tls;
pub mod truth;

pub use server::{SimError, SimHandle, SimOptions};
