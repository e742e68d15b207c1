//! `wsgate status [-n NAMESPACE]`: the workspaces of a namespace in plain words.

use kube::api::{Api, ListParams};

use super::CommandError;
use crate::cli::TargetArgs;
use crate::config::{self, LoadRequest, TargetKind};
use crate::platform::crd::Workspace;
use crate::platform::{snapshots, status, target};

pub async fn status(args: TargetArgs) -> Result<i32, CommandError> {
    let resolved = config::load(&LoadRequest {
        profile: None,
        env: crate::config::process_env()?,
        overrides: args.overrides(),
    })?;
    let cfg = resolved.config;
    if cfg.target.kind == TargetKind::Sim {
        return Err(CommandError::Usage(
            "`wsgate status` reads a cluster: pass --target cluster with --context or --kubeconfig \
             (for the simulator, use the kubeconfig `wsgate sim` writes)"
                .into(),
        ));
    }
    let retry = crate::platform::retry::RetryPolicy::from_config(&cfg.api);
    let client = target::connect(target::cluster_config(&cfg.target).await?, retry).await?;
    let ns = &cfg.target.namespace;
    let api: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await.map_err(|source| {
        CommandError::Target(target::TargetError::Namespace {
            namespace: ns.clone(),
            source,
        })
    })?;
    let mut rows = Vec::new();
    for ws in &list.items {
        let name = ws.metadata.name.clone().unwrap_or_default();
        let snaps = snapshots::of_workspace(&client, ns, &name)
            .await
            .unwrap_or_default();
        rows.push(status::describe(ws, &snaps));
    }
    if rows.is_empty() {
        println!("no workspaces in namespace {ns}");
    } else {
        print!("{}", status::table(&rows));
    }
    Ok(crate::exit_code::SUCCESS)
}
