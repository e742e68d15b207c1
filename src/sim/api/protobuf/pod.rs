//! The pod template inside a Deployment, Job or CronJob body: the fields kubectl's
//! generators write (containers with image, command, ports, env and resources; restart
//! policy) and the common ones a template built elsewhere carries (volumes of four sources,
//! mounts, tolerations, node selector, service account, init containers). Probes,
//! lifecycle hooks, security contexts, affinity and the rarer fields are named as not
//! mapped (`Unmapped`), and the body is refused.

use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value, json};

use super::{Unmapped, flag, metadata, opt, put, quantities};

/// A `PodTemplateSpec` at `path` (e.g. `spec.template`).
pub(super) fn template(t: Option<core::PodTemplateSpec>, path: &str, u: &mut Unmapped) -> Value {
    let core::PodTemplateSpec { metadata: m, spec } = t.unwrap_or_default();
    json!({
        "metadata": metadata(m),
        "spec": pod_spec(spec.unwrap_or_default(), &format!("{path}.spec"), u),
    })
}

fn pod_spec(s: core::PodSpec, path: &str, u: &mut Unmapped) -> Value {
    let core::PodSpec {
        volumes,
        init_containers,
        containers,
        ephemeral_containers,
        restart_policy,
        termination_grace_period_seconds,
        active_deadline_seconds,
        dns_policy,
        node_selector,
        service_account_name,
        service_account,
        automount_service_account_token,
        node_name,
        host_network,
        host_pid,
        host_ipc,
        share_process_namespace,
        security_context,
        image_pull_secrets,
        hostname,
        subdomain,
        affinity,
        scheduler_name,
        tolerations,
        host_aliases,
        priority_class_name,
        priority,
        dns_config,
        readiness_gates,
        runtime_class_name,
        enable_service_links,
        preemption_policy,
        overhead,
        topology_spread_constraints,
        set_hostname_as_fqdn,
        os,
        host_users,
        scheduling_gates,
        resource_claims,
        resources,
    } = s;
    unmapped!(u, path; ephemeral_containers, security_context, affinity, host_aliases,
        dns_config, readiness_gates, overhead, topology_spread_constraints, os,
        scheduling_gates, resource_claims, resources);
    unmapped!(u, path; pointers: share_process_namespace, preemption_policy,
        set_hostname_as_fqdn, host_users);
    let mut o = Map::new();
    let volumes: Vec<Value> = volumes
        .into_iter()
        .enumerate()
        .map(|(i, v)| volume(v, &format!("{path}.volumes[{i}]"), u))
        .collect();
    put(&mut o, "volumes", json!(volumes));
    let init = containers_at(init_containers, &format!("{path}.initContainers"), u);
    put(&mut o, "initContainers", json!(init));
    let main = containers_at(containers, &format!("{path}.containers"), u);
    o.insert("containers".into(), json!(main));
    put(&mut o, "restartPolicy", json!(restart_policy));
    opt(
        &mut o,
        "terminationGracePeriodSeconds",
        termination_grace_period_seconds,
    );
    opt(&mut o, "activeDeadlineSeconds", active_deadline_seconds);
    put(&mut o, "dnsPolicy", json!(dns_policy));
    put(&mut o, "nodeSelector", json!(node_selector));
    put(&mut o, "serviceAccountName", json!(service_account_name));
    put(&mut o, "serviceAccount", json!(service_account));
    opt(
        &mut o,
        "automountServiceAccountToken",
        automount_service_account_token,
    );
    put(&mut o, "nodeName", json!(node_name));
    flag(&mut o, "hostNetwork", host_network);
    flag(&mut o, "hostPID", host_pid);
    flag(&mut o, "hostIPC", host_ipc);
    let pull: Vec<Value> = image_pull_secrets
        .into_iter()
        .map(|r| {
            let mut o = Map::new();
            put(&mut o, "name", json!(r.name));
            Value::Object(o)
        })
        .collect();
    put(&mut o, "imagePullSecrets", json!(pull));
    put(&mut o, "hostname", json!(hostname));
    put(&mut o, "subdomain", json!(subdomain));
    put(&mut o, "schedulerName", json!(scheduler_name));
    let tolerations: Vec<Value> = tolerations.into_iter().map(toleration).collect();
    put(&mut o, "tolerations", json!(tolerations));
    put(&mut o, "priorityClassName", json!(priority_class_name));
    opt(&mut o, "priority", priority);
    opt(&mut o, "runtimeClassName", runtime_class_name);
    opt(&mut o, "enableServiceLinks", enable_service_links);
    Value::Object(o)
}

fn containers_at(list: Vec<core::Container>, path: &str, u: &mut Unmapped) -> Vec<Value> {
    list.into_iter()
        .enumerate()
        .map(|(i, c)| container(c, &format!("{path}[{i}]"), u))
        .collect()
}

fn container(c: core::Container, path: &str, u: &mut Unmapped) -> Value {
    let core::Container {
        name,
        image,
        command,
        args,
        working_dir,
        ports,
        env_from,
        env,
        resources,
        resize_policy,
        restart_policy,
        volume_mounts,
        volume_devices,
        liveness_probe,
        readiness_probe,
        startup_probe,
        lifecycle,
        termination_message_path,
        termination_message_policy,
        image_pull_policy,
        security_context,
        stdin,
        stdin_once,
        tty,
    } = c;
    unmapped!(u, path; resize_policy, volume_devices, liveness_probe, readiness_probe,
        startup_probe, lifecycle, security_context);
    let mut o = Map::new();
    put(&mut o, "name", json!(name));
    put(&mut o, "image", json!(image));
    put(&mut o, "command", json!(command));
    put(&mut o, "args", json!(args));
    put(&mut o, "workingDir", json!(working_dir));
    let ports: Vec<Value> = ports
        .into_iter()
        .map(|p| {
            let mut o = Map::new();
            put(&mut o, "name", json!(p.name));
            put(&mut o, "hostPort", json!(p.host_port));
            put(&mut o, "containerPort", json!(p.container_port));
            put(&mut o, "protocol", json!(p.protocol));
            put(&mut o, "hostIP", json!(p.host_ip));
            Value::Object(o)
        })
        .collect();
    put(&mut o, "ports", json!(ports));
    let env_from: Vec<Value> = env_from.into_iter().map(env_from_source).collect();
    put(&mut o, "envFrom", json!(env_from));
    let env: Vec<Value> = env.into_iter().map(env_var).collect();
    put(&mut o, "env", json!(env));
    let resources = resources.unwrap_or_default();
    let claims = resources.claims;
    unmapped!(u, &format!("{path}.resources"); claims);
    let mut r = Map::new();
    put(&mut r, "limits", quantities(resources.limits));
    put(&mut r, "requests", quantities(resources.requests));
    o.insert("resources".into(), Value::Object(r));
    opt(&mut o, "restartPolicy", restart_policy);
    let mounts: Vec<Value> = volume_mounts
        .into_iter()
        .map(|m| {
            let mut o = Map::new();
            put(&mut o, "name", json!(m.name));
            flag(&mut o, "readOnly", m.read_only);
            opt(&mut o, "recursiveReadOnly", m.recursive_read_only);
            put(&mut o, "mountPath", json!(m.mount_path));
            put(&mut o, "subPath", json!(m.sub_path));
            opt(&mut o, "mountPropagation", m.mount_propagation);
            put(&mut o, "subPathExpr", json!(m.sub_path_expr));
            Value::Object(o)
        })
        .collect();
    put(&mut o, "volumeMounts", json!(mounts));
    put(
        &mut o,
        "terminationMessagePath",
        json!(termination_message_path),
    );
    put(
        &mut o,
        "terminationMessagePolicy",
        json!(termination_message_policy),
    );
    put(&mut o, "imagePullPolicy", json!(image_pull_policy));
    flag(&mut o, "stdin", stdin);
    flag(&mut o, "stdinOnce", stdin_once);
    flag(&mut o, "tty", tty);
    Value::Object(o)
}

fn env_var(e: core::EnvVar) -> Value {
    let mut o = Map::new();
    put(&mut o, "name", json!(e.name));
    put(&mut o, "value", json!(e.value));
    if let Some(from) = e.value_from {
        let mut f = Map::new();
        if let Some(r) = from.field_ref {
            let mut s = Map::new();
            put(&mut s, "apiVersion", json!(r.api_version));
            put(&mut s, "fieldPath", json!(r.field_path));
            f.insert("fieldRef".into(), Value::Object(s));
        }
        if let Some(r) = from.resource_field_ref {
            let mut s = Map::new();
            put(&mut s, "containerName", json!(r.container_name));
            put(&mut s, "resource", json!(r.resource));
            opt(&mut s, "divisor", r.divisor.and_then(|q| q.string));
            f.insert("resourceFieldRef".into(), Value::Object(s));
        }
        if let Some(r) = from.config_map_key_ref {
            let name = r.local_object_reference.and_then(|l| l.name);
            f.insert("configMapKeyRef".into(), key_ref(name, r.key, r.optional));
        }
        if let Some(r) = from.secret_key_ref {
            let name = r.local_object_reference.and_then(|l| l.name);
            f.insert("secretKeyRef".into(), key_ref(name, r.key, r.optional));
        }
        o.insert("valueFrom".into(), Value::Object(f));
    }
    Value::Object(o)
}

fn key_ref(name: Option<String>, key: Option<String>, optional: Option<bool>) -> Value {
    let mut o = Map::new();
    put(&mut o, "name", json!(name));
    put(&mut o, "key", json!(key));
    opt(&mut o, "optional", optional);
    Value::Object(o)
}

fn env_from_source(e: core::EnvFromSource) -> Value {
    let mut o = Map::new();
    put(&mut o, "prefix", json!(e.prefix));
    if let Some(r) = e.config_map_ref {
        let name = r.local_object_reference.and_then(|l| l.name);
        o.insert("configMapRef".into(), key_ref(name, None, r.optional));
    }
    if let Some(r) = e.secret_ref {
        let name = r.local_object_reference.and_then(|l| l.name);
        o.insert("secretRef".into(), key_ref(name, None, r.optional));
    }
    Value::Object(o)
}

fn toleration(t: core::Toleration) -> Value {
    let mut o = Map::new();
    put(&mut o, "key", json!(t.key));
    put(&mut o, "operator", json!(t.operator));
    put(&mut o, "value", json!(t.value));
    put(&mut o, "effect", json!(t.effect));
    opt(&mut o, "tolerationSeconds", t.toleration_seconds);
    Value::Object(o)
}

/// A volume of one of four sources (emptyDir, persistentVolumeClaim, configMap, secret);
/// any other source is named as not mapped.
fn volume(v: core::Volume, path: &str, u: &mut Unmapped) -> Value {
    let mut o = Map::new();
    put(&mut o, "name", json!(v.name));
    let mut src = v.volume_source.unwrap_or_default();
    if let Some(e) = src.empty_dir.take() {
        let mut s = Map::new();
        put(&mut s, "medium", json!(e.medium));
        opt(&mut s, "sizeLimit", e.size_limit.and_then(|q| q.string));
        o.insert("emptyDir".into(), Value::Object(s));
    }
    if let Some(c) = src.persistent_volume_claim.take() {
        let mut s = Map::new();
        put(&mut s, "claimName", json!(c.claim_name));
        flag(&mut s, "readOnly", c.read_only);
        o.insert("persistentVolumeClaim".into(), Value::Object(s));
    }
    if let Some(c) = src.config_map.take() {
        let mut s = Map::new();
        put(
            &mut s,
            "name",
            json!(c.local_object_reference.and_then(|l| l.name)),
        );
        put(&mut s, "items", json!(items(c.items)));
        opt(&mut s, "defaultMode", c.default_mode);
        opt(&mut s, "optional", c.optional);
        o.insert("configMap".into(), Value::Object(s));
    }
    if let Some(c) = src.secret.take() {
        let mut s = Map::new();
        put(&mut s, "secretName", json!(c.secret_name));
        put(&mut s, "items", json!(items(c.items)));
        opt(&mut s, "defaultMode", c.default_mode);
        opt(&mut s, "optional", c.optional);
        o.insert("secret".into(), Value::Object(s));
    }
    if src != core::VolumeSource::default() {
        u.path(format!(
            "{path} (a volume source other than emptyDir, persistentVolumeClaim, configMap \
             and secret)"
        ));
    }
    Value::Object(o)
}

fn items(list: Vec<core::KeyToPath>) -> Vec<Value> {
    list.into_iter()
        .map(|k| {
            let mut o = Map::new();
            put(&mut o, "key", json!(k.key));
            put(&mut o, "path", json!(k.path));
            opt(&mut o, "mode", k.mode);
            Value::Object(o)
        })
        .collect()
}
