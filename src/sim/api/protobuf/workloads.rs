//! Deployment, Job, CronJob and Service bodies, as `kubectl create deployment|job|cronjob|
//! service` write them (kubectl's `pkg/cmd/create/create_*.go`): every field of their specs
//! is mapped except a Job's pod failure and success policies and a Service's session
//! affinity config, which refuse the body when set. `status` is the server's and not read.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value, json};

use super::{Unmapped, flag, int_or_string, label_selector, metadata, opt, pod, put};

pub(super) fn deployment(d: apps::Deployment, u: &mut Unmapped) -> Value {
    let apps::Deployment {
        metadata: m,
        spec,
        status: _,
    } = d;
    let apps::DeploymentSpec {
        replicas,
        selector,
        template,
        strategy,
        min_ready_seconds,
        revision_history_limit,
        paused,
        progress_deadline_seconds,
    } = spec.unwrap_or_default();
    let mut s = Map::new();
    opt(&mut s, "replicas", replicas);
    if let Some(sel) = selector {
        s.insert("selector".into(), label_selector(sel));
    }
    s.insert(
        "template".into(),
        pod::template(template, "spec.template", u),
    );
    let strategy = strategy.unwrap_or_default();
    let mut st = Map::new();
    put(&mut st, "type", json!(strategy.r#type));
    if let Some(r) = strategy.rolling_update {
        let mut ru = Map::new();
        if let Some(v) = r.max_unavailable {
            ru.insert("maxUnavailable".into(), int_or_string(v));
        }
        if let Some(v) = r.max_surge {
            ru.insert("maxSurge".into(), int_or_string(v));
        }
        st.insert("rollingUpdate".into(), Value::Object(ru));
    }
    s.insert("strategy".into(), Value::Object(st));
    put(&mut s, "minReadySeconds", json!(min_ready_seconds));
    opt(&mut s, "revisionHistoryLimit", revision_history_limit);
    flag(&mut s, "paused", paused);
    opt(&mut s, "progressDeadlineSeconds", progress_deadline_seconds);
    json!({"metadata": metadata(m), "spec": s})
}

pub(super) fn job(j: batch::Job, u: &mut Unmapped) -> Value {
    let batch::Job {
        metadata: m,
        spec,
        status: _,
    } = j;
    json!({"metadata": metadata(m), "spec": job_spec(spec.unwrap_or_default(), "spec", u)})
}

fn job_spec(spec: batch::JobSpec, path: &str, u: &mut Unmapped) -> Value {
    let batch::JobSpec {
        parallelism,
        completions,
        active_deadline_seconds,
        pod_failure_policy,
        success_policy,
        backoff_limit,
        backoff_limit_per_index,
        max_failed_indexes,
        selector,
        manual_selector,
        template,
        ttl_seconds_after_finished,
        completion_mode,
        suspend,
        pod_replacement_policy,
        managed_by,
    } = spec;
    unmapped!(u, path; pod_failure_policy, success_policy);
    let mut s = Map::new();
    opt(&mut s, "parallelism", parallelism);
    opt(&mut s, "completions", completions);
    opt(&mut s, "activeDeadlineSeconds", active_deadline_seconds);
    opt(&mut s, "backoffLimit", backoff_limit);
    opt(&mut s, "backoffLimitPerIndex", backoff_limit_per_index);
    opt(&mut s, "maxFailedIndexes", max_failed_indexes);
    if let Some(sel) = selector {
        s.insert("selector".into(), label_selector(sel));
    }
    opt(&mut s, "manualSelector", manual_selector);
    s.insert(
        "template".into(),
        pod::template(template, &format!("{path}.template"), u),
    );
    opt(
        &mut s,
        "ttlSecondsAfterFinished",
        ttl_seconds_after_finished,
    );
    opt(&mut s, "completionMode", completion_mode);
    opt(&mut s, "suspend", suspend);
    opt(&mut s, "podReplacementPolicy", pod_replacement_policy);
    opt(&mut s, "managedBy", managed_by);
    Value::Object(s)
}

pub(super) fn cron_job(c: batch::CronJob, u: &mut Unmapped) -> Value {
    let batch::CronJob {
        metadata: m,
        spec,
        status: _,
    } = c;
    let batch::CronJobSpec {
        schedule,
        time_zone,
        starting_deadline_seconds,
        concurrency_policy,
        suspend,
        job_template,
        successful_jobs_history_limit,
        failed_jobs_history_limit,
    } = spec.unwrap_or_default();
    let mut s = Map::new();
    put(&mut s, "schedule", json!(schedule));
    opt(&mut s, "timeZone", time_zone);
    opt(&mut s, "startingDeadlineSeconds", starting_deadline_seconds);
    put(&mut s, "concurrencyPolicy", json!(concurrency_policy));
    opt(&mut s, "suspend", suspend);
    let batch::JobTemplateSpec {
        metadata: tm,
        spec: ts,
    } = job_template.unwrap_or_default();
    s.insert(
        "jobTemplate".into(),
        json!({
            "metadata": metadata(tm),
            "spec": job_spec(ts.unwrap_or_default(), "spec.jobTemplate.spec", u),
        }),
    );
    opt(
        &mut s,
        "successfulJobsHistoryLimit",
        successful_jobs_history_limit,
    );
    opt(&mut s, "failedJobsHistoryLimit", failed_jobs_history_limit);
    json!({"metadata": metadata(m), "spec": s})
}

pub(super) fn service(svc: core::Service, u: &mut Unmapped) -> Value {
    let core::Service {
        metadata: m,
        spec,
        status: _,
    } = svc;
    let core::ServiceSpec {
        ports,
        selector,
        cluster_ip,
        cluster_ips,
        r#type,
        external_ips,
        session_affinity,
        load_balancer_ip,
        load_balancer_source_ranges,
        external_name,
        external_traffic_policy,
        health_check_node_port,
        publish_not_ready_addresses,
        session_affinity_config,
        ip_families,
        ip_family_policy,
        allocate_load_balancer_node_ports,
        load_balancer_class,
        internal_traffic_policy,
        traffic_distribution,
    } = spec.unwrap_or_default();
    unmapped!(u, "spec"; session_affinity_config);
    let mut s = Map::new();
    let ports: Vec<Value> = ports
        .into_iter()
        .map(|p| {
            let mut o = Map::new();
            put(&mut o, "name", json!(p.name));
            put(&mut o, "protocol", json!(p.protocol));
            opt(&mut o, "appProtocol", p.app_protocol);
            put(&mut o, "port", json!(p.port));
            // Go writes a zero IntOrString; the API server's defaulting then makes it the
            // port. Left out here, as a JSON client that leaves it out.
            put(
                &mut o,
                "targetPort",
                p.target_port.map(int_or_string).unwrap_or_default(),
            );
            put(&mut o, "nodePort", json!(p.node_port));
            Value::Object(o)
        })
        .collect();
    put(&mut s, "ports", json!(ports));
    put(&mut s, "selector", json!(selector));
    put(&mut s, "clusterIP", json!(cluster_ip));
    put(&mut s, "clusterIPs", json!(cluster_ips));
    put(&mut s, "type", json!(r#type));
    put(&mut s, "externalIPs", json!(external_ips));
    put(&mut s, "sessionAffinity", json!(session_affinity));
    put(&mut s, "loadBalancerIP", json!(load_balancer_ip));
    put(
        &mut s,
        "loadBalancerSourceRanges",
        json!(load_balancer_source_ranges),
    );
    put(&mut s, "externalName", json!(external_name));
    put(
        &mut s,
        "externalTrafficPolicy",
        json!(external_traffic_policy),
    );
    put(&mut s, "healthCheckNodePort", json!(health_check_node_port));
    flag(
        &mut s,
        "publishNotReadyAddresses",
        publish_not_ready_addresses,
    );
    put(&mut s, "ipFamilies", json!(ip_families));
    opt(&mut s, "ipFamilyPolicy", ip_family_policy);
    opt(
        &mut s,
        "allocateLoadBalancerNodePorts",
        allocate_load_balancer_node_ports,
    );
    opt(&mut s, "loadBalancerClass", load_balancer_class);
    opt(&mut s, "internalTrafficPolicy", internal_traffic_policy);
    opt(&mut s, "trafficDistribution", traffic_distribution);
    json!({"metadata": metadata(m), "spec": s})
}
