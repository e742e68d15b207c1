//! The one integration-test binary: every test here runs against real components (the
//! embedded simulator over HTTPS, real `jupyter server` processes, real files).

mod anywhere;
mod api_trouble;
mod bad_features;
mod bad_input;
mod calibrate;
mod cleanup;
mod cli;
mod common;
mod config;
mod deploy;
mod doctor;
mod drill;
mod gate;
mod interrupt;
mod kubectl;
mod ownership;
mod pod_streams;
mod python_client;
mod rbac;
mod report;
mod session;
mod session_xsrf;
mod sim_api;
mod sim_bad_input;
mod sim_cycle;
mod sim_platform;
mod sim_snapshots;
mod sim_workspace;
mod squeeze;
mod trial;
