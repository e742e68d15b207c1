//! Decoding tests: bodies built with k8s-pb as kubectl builds them.

use super::*;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

/// The envelope as kubectl writes it (checked byte for byte against kubectl 1.32's
/// `-v=9` dump of `kubectl create secret generic s1 --from-literal=a=b`: the magic,
/// then `Unknown{typeMeta, raw}`, with gogo's empty optional strings in the metadata).
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn meta(name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some("wsgate-test".into()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        labels: [("app".to_string(), "x".to_string())].into(),
        ..Default::default()
    })
}

#[test]
fn a_secret_becomes_its_json_with_base64_data_and_no_zero_values() {
    let s = core::Secret {
        metadata: meta("s1"),
        data: [("a".to_string(), b"b\x00\xff".to_vec())].into(),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "Secret", s.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "s1", "namespace": "wsgate-test", "labels": {"app": "x"}},
            "data": {"a": "YgD/"}})
    );
}

#[test]
fn a_quota_keeps_its_quantities_as_strings_and_its_scope_selector() {
    let q = core::ResourceQuota {
        metadata: meta("q1"),
        spec: Some(core::ResourceQuotaSpec {
            hard: [(
                "requests.nvidia.com/gpu".to_string(),
                Quantity {
                    string: Some("0".into()),
                },
            )]
            .into(),
            scopes: vec![],
            scope_selector: Some(core::ScopeSelector {
                match_expressions: vec![core::ScopedResourceSelectorRequirement {
                    scope_name: Some("PriorityClass".into()),
                    operator: Some("In".into()),
                    values: vec!["high".into()],
                }],
            }),
        }),
        status: None,
    };
    let v = decode(&envelope("v1", "ResourceQuota", q.encode_to_vec())).unwrap();
    assert_eq!(v["spec"]["hard"], json!({"requests.nvidia.com/gpu": "0"}));
    assert_eq!(
        v["spec"]["scopeSelector"],
        json!({"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]})
    );
    assert!(v["spec"].get("scopes").is_none(), "{v}");
}

#[test]
fn other_kinds_bad_envelopes_and_garbage_are_refused_with_a_reason() {
    let pod = envelope("v1", "Pod", vec![]);
    let e = decode(&pod).unwrap_err();
    assert_eq!(e.code, 415);
    assert!(
        e.message.contains("\"Pod\"") && e.message.contains("as JSON"),
        "{}",
        e.message
    );
    let e = decode(b"{\"kind\":\"Secret\"}").unwrap_err();
    assert_eq!(e.code, 400);
    assert!(e.message.contains("envelope"), "{}", e.message);
    let mut garbage = MAGIC.to_vec();
    garbage.extend([0x0a, 0xff, 0xff]);
    assert_eq!(decode(&garbage).unwrap_err().code, 400);
    let mut inner = envelope("v1", "Secret", vec![0x0a, 0x05, 0x01]);
    assert_eq!(decode(&inner).unwrap_err().code, 400);
    inner = envelope("v1", "ConfigMap", vec![]);
    assert_eq!(
        decode(&inner).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    );
}

/// A container as kubectl's generators write it: gogo writes every plain field, so the
/// strings are `Some("")`, the bools `Some(false)` and `resources` an empty message.
fn generated_container(name: &str, image: &str, command: &[&str]) -> core::Container {
    core::Container {
        name: Some(name.into()),
        image: Some(image.into()),
        command: command.iter().map(|c| (*c).into()).collect(),
        working_dir: Some(String::new()),
        resources: Some(core::ResourceRequirements::default()),
        termination_message_path: Some(String::new()),
        termination_message_policy: Some(String::new()),
        image_pull_policy: Some(String::new()),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    }
}

fn generated_pod_spec(containers: Vec<core::Container>, restart: &str) -> core::PodSpec {
    core::PodSpec {
        containers,
        restart_policy: Some(restart.into()),
        dns_policy: Some(String::new()),
        service_account_name: Some(String::new()),
        node_name: Some(String::new()),
        host_network: Some(false),
        host_pid: Some(false),
        host_ipc: Some(false),
        hostname: Some(String::new()),
        scheduler_name: Some(String::new()),
        ..Default::default()
    }
}

fn deployment(replicas: i32, container: core::Container) -> apps::Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "d1".to_string())].into();
    apps::Deployment {
        metadata: meta("d1"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(replicas),
            selector: Some(LabelSelector {
                match_labels: labels.clone(),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(generated_pod_spec(vec![container], "")),
            }),
            strategy: Some(apps::DeploymentStrategy::default()),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            replicas: Some(3),
            observed_generation: Some(2),
            ..Default::default()
        }),
    }
}

#[test]
fn a_deployment_keeps_a_zero_pointer_field_and_drops_go_zero_values() {
    let mut c = generated_container("busybox", "busybox", &["sleep", "1"]);
    c.ports = vec![core::ContainerPort {
        container_port: Some(80),
        host_port: Some(0),
        name: Some(String::new()),
        protocol: Some(String::new()),
        host_ip: Some(String::new()),
    }];
    let d = deployment(0, c);
    let v = decode(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap();
    assert_eq!(
        v["spec"],
        json!({
            "replicas": 0,
            "selector": {"matchLabels": {"app": "d1"}},
            "strategy": {},
            "template": {
                "metadata": {"labels": {"app": "d1"}},
                "spec": {"containers": [{
                    "name": "busybox", "image": "busybox", "command": ["sleep", "1"],
                    "ports": [{"containerPort": 80}], "resources": {},
                }]},
            },
        })
    );
    assert!(v.get("status").is_none(), "status is the server's: {v}");
}

#[test]
fn a_field_not_mapped_refuses_the_body_and_names_it() {
    let mut c = generated_container("app", "busybox", &[]);
    c.liveness_probe = Some(core::Probe {
        initial_delay_seconds: Some(5),
        ..Default::default()
    });
    // Go pointers present at zero are values `json` would write, not absences.
    c.security_context = Some(core::SecurityContext {
        privileged: Some(false),
        ..Default::default()
    });
    let mut d = deployment(1, c);
    let spec = d.spec.as_mut().unwrap().template.as_mut().unwrap();
    let pod = spec.spec.as_mut().unwrap();
    pod.security_context = Some(core::PodSecurityContext {
        run_as_user: Some(0),
        ..Default::default()
    });
    // Every scalar pointer at its zero: each must be in `unmapped!`'s `pointers:` list.
    pod.host_users = Some(false);
    pod.share_process_namespace = Some(false);
    pod.set_hostname_as_fqdn = Some(false);
    pod.preemption_policy = Some(String::new());
    pod.volumes = vec![
        core::Volume {
            name: Some("scratch".into()),
            volume_source: Some(core::VolumeSource {
                empty_dir: Some(core::EmptyDirVolumeSource::default()),
                ..Default::default()
            }),
        },
        core::Volume {
            name: Some("host".into()),
            volume_source: Some(core::VolumeSource {
                host_path: Some(core::HostPathVolumeSource {
                    path: Some("/etc".into()),
                    r#type: None,
                }),
                ..Default::default()
            }),
        },
        core::Volume {
            name: Some("pod-info".into()),
            volume_source: Some(core::VolumeSource {
                downward_api: Some(core::DownwardAPIVolumeSource::default()),
                ..Default::default()
            }),
        },
    ];
    let e = decode(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap_err();
    assert_eq!(e.code, 415, "{}", e.message);
    for field in [
        "spec.template.spec.containers[0].livenessProbe",
        "spec.template.spec.containers[0].securityContext",
        "spec.template.spec.securityContext",
        "spec.template.spec.hostUsers",
        "spec.template.spec.shareProcessNamespace",
        "spec.template.spec.setHostnameAsFQDN",
        "spec.template.spec.preemptionPolicy",
        "spec.template.spec.volumes[1] (a volume source other than",
        "spec.template.spec.volumes[2] (a volume source other than",
    ] {
        assert!(e.message.contains(field), "{field}: {}", e.message);
    }
    assert!(!e.message.contains("volumes[0]"), "{}", e.message);
    assert!(e.message.contains("as JSON"), "{}", e.message);
}

#[test]
fn an_empty_pod_security_context_carries_nothing_and_is_taken() {
    // A real API server writes `securityContext: {}` into every pod (SetDefaults_PodSpec),
    // so templates read back from a cluster carry it: nothing is dropped by taking them.
    let mut d = deployment(1, generated_container("app", "busybox", &[]));
    let spec = d.spec.as_mut().unwrap().template.as_mut().unwrap();
    spec.spec.as_mut().unwrap().security_context = Some(core::PodSecurityContext::default());
    let v = decode(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap();
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0]["name"],
        "app"
    );
}

#[test]
fn a_field_number_the_schema_does_not_know_is_skipped_as_the_api_server_skips_it() {
    let s = core::Secret {
        metadata: meta("s1"),
        string_data: [("k".to_string(), "v".to_string())].into(),
        ..Default::default()
    };
    let known = decode(&envelope("v1", "Secret", s.encode_to_vec())).unwrap();
    let mut raw = s.encode_to_vec();
    // Field 999, a varint: what a newer client's field looks like to an older schema.
    prost::encoding::encode_varint(999 << 3, &mut raw);
    prost::encoding::encode_varint(7, &mut raw);
    let newer = decode(&envelope("v1", "Secret", raw)).unwrap();
    assert_eq!(newer, known);
    assert_eq!(newer["stringData"], json!({"k": "v"}));
}

#[test]
fn a_cron_job_and_its_job_template_keep_their_pod_template() {
    let mut c = generated_container("c1", "busybox", &["date"]);
    c.env = vec![
        core::EnvVar {
            name: Some("A".into()),
            value: Some("1".into()),
            value_from: None,
        },
        core::EnvVar {
            name: Some("POD".into()),
            value: Some(String::new()),
            value_from: Some(core::EnvVarSource {
                field_ref: Some(core::ObjectFieldSelector {
                    api_version: Some("v1".into()),
                    field_path: Some("metadata.name".into()),
                }),
                ..Default::default()
            }),
        },
    ];
    let cj = batch::CronJob {
        metadata: meta("c1"),
        spec: Some(batch::CronJobSpec {
            schedule: Some("*/1 * * * *".into()),
            concurrency_policy: Some(String::new()),
            suspend: Some(false),
            job_template: Some(batch::JobTemplateSpec {
                metadata: meta("c1"),
                spec: Some(batch::JobSpec {
                    backoff_limit: Some(0),
                    template: Some(core::PodTemplateSpec {
                        metadata: None,
                        spec: Some(generated_pod_spec(vec![c], "OnFailure")),
                    }),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let v = decode(&envelope("batch/v1", "CronJob", cj.encode_to_vec())).unwrap();
    assert_eq!(v["spec"]["schedule"], "*/1 * * * *");
    assert_eq!(v["spec"]["suspend"], false, "a pointer field kept at false");
    let job = &v["spec"]["jobTemplate"]["spec"];
    assert_eq!(job["backoffLimit"], 0);
    let pod = &job["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "OnFailure");
    assert_eq!(
        pod["containers"][0]["env"],
        json!([{"name": "A", "value": "1"},
            {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}])
    );
}

#[test]
fn a_service_keeps_a_named_target_port_and_role_bindings_their_subjects() {
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    let svc = core::Service {
        metadata: meta("s1"),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: Some("80-http".into()),
                protocol: Some("TCP".into()),
                port: Some(80),
                target_port: Some(IntOrString {
                    r#type: Some(1),
                    int_val: Some(0),
                    str_val: Some("http".into()),
                }),
                node_port: Some(0),
                app_protocol: None,
            }],
            selector: [("app".to_string(), "s1".to_string())].into(),
            cluster_ip: Some(String::new()),
            r#type: Some("NodePort".into()),
            health_check_node_port: Some(0),
            publish_not_ready_addresses: Some(false),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus::default()),
    };
    let v = decode(&envelope("v1", "Service", svc.encode_to_vec())).unwrap();
    assert_eq!(
        v["spec"],
        json!({"ports": [{"name": "80-http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
            "selector": {"app": "s1"}, "type": "NodePort"})
    );
    let rb = rbac::RoleBinding {
        metadata: meta("rb1"),
        subjects: vec![rbac::Subject {
            kind: Some("ServiceAccount".into()),
            api_group: Some(String::new()),
            name: Some("default".into()),
            namespace: Some("wsgate-test".into()),
        }],
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("Role".into()),
            name: Some("r1".into()),
        }),
    };
    let v = decode(&envelope(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        rb.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(
        v["subjects"],
        json!([{"kind": "ServiceAccount", "name": "default", "namespace": "wsgate-test"}])
    );
    assert_eq!(v["roleRef"]["name"], "r1");
    let role = rbac::Role {
        metadata: meta("r1"),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["pods".into()],
            ..Default::default()
        }],
    };
    let v = decode(&envelope(
        "rbac.authorization.k8s.io/v1",
        "Role",
        role.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(
        v["rules"],
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}])
    );
}

#[test]
fn json_names_follow_the_api_spelling() {
    assert_eq!(json_name("set_hostname_as_fqdn"), "setHostnameAsFQDN");
    assert_eq!(json_name("liveness_probe"), "livenessProbe");
    assert_eq!(json_name("r#type"), "type");
}
