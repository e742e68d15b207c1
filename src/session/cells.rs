//! Cell templates (`fixtures/cells/`, embedded at build time) and how their parameters are
//! filled: as base64-encoded JSON handed to a function, never pasted into code where quoting
//! could break. `fixtures/cells/README.md` states the template contract.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde_json::Value;

/// A model the marker protocol can load.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum Model {
    /// numpy, deterministic weights, CPU: what the simulator runs.
    #[value(name = "sim-tiny")]
    #[serde(rename = "sim-tiny")]
    SimTiny,
    /// Qwen2.5-3B-Instruct fp16 with transformers + torch on one CUDA GPU.
    #[value(name = "qwen2.5-3b-t4")]
    #[serde(rename = "qwen2.5-3b-t4")]
    Qwen25_3bT4,
}

/// The model `workspace.model` names.
impl From<crate::config::Model> for Model {
    fn from(m: crate::config::Model) -> Self {
        match m {
            crate::config::Model::SimTiny => Model::SimTiny,
            crate::config::Model::Qwen3bT4 => Model::Qwen25_3bT4,
        }
    }
}

impl Model {
    /// The model's name, as in `fixtures/cells/<name>/`.
    pub fn name(self) -> &'static str {
        match self {
            Model::SimTiny => "sim-tiny",
            Model::Qwen25_3bT4 => "qwen2.5-3b-t4",
        }
    }

    /// The file names of the run's input, application checkpoint and output.
    pub fn file_names(self) -> [(&'static str, &'static str); 3] {
        match self {
            Model::SimTiny => [
                ("input", "input.npy"),
                ("checkpoint", "checkpoint.npz"),
                ("output", "output.npy"),
            ],
            Model::Qwen25_3bT4 => [
                ("input", "input.json"),
                ("checkpoint", "checkpoint.json"),
                ("output", "output.json"),
            ],
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One step of the marker protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cell {
    /// Load the model into kernel memory.
    LoadModel,
    /// Store the nonce (silent, no history) and start the ticker.
    StoreMarker,
    /// Write the input and the application checkpoint.
    WriteFiles,
    /// Run the model; write the output.
    UseModel,
    /// Report the kernel evidence.
    CheckMarker,
    /// Search the home and working directory for the nonce.
    ScanDisk,
    /// Rebuild the model from the application checkpoint (in a fresh process).
    RecoverCheckpoint,
    /// Stay busy for a while, printing progress (idle.feature).
    BusyProgress,
    /// Make every later cell of the kernel slower by a set time (timing scenarios).
    SlowCells,
}

impl Cell {
    /// Every cell.
    pub const ALL: [Cell; 9] = [
        Cell::LoadModel,
        Cell::StoreMarker,
        Cell::WriteFiles,
        Cell::UseModel,
        Cell::CheckMarker,
        Cell::ScanDisk,
        Cell::RecoverCheckpoint,
        Cell::BusyProgress,
        Cell::SlowCells,
    ];

    /// The template's file stem and the name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Cell::LoadModel => "load_model",
            Cell::StoreMarker => "store_marker",
            Cell::WriteFiles => "write_files",
            Cell::UseModel => "use_model",
            Cell::CheckMarker => "check_marker",
            Cell::ScanDisk => "scan_disk",
            Cell::RecoverCheckpoint => "recover_checkpoint",
            Cell::BusyProgress => "busy_progress",
            Cell::SlowCells => "slow_cells",
        }
    }
}

/// A template could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum CellTemplateError {
    /// The template lacks its `# params:` header line.
    #[error("cell template {path} has no `# params:` header line")]
    NoParamsHeader { path: &'static str },
    /// The template does not define `_wsgate_cell(params)`.
    #[error("cell template {path} does not define `def _wsgate_cell(params):`")]
    NoEntryPoint { path: &'static str },
    /// A declared parameter has no value.
    #[error("cell template {path} needs parameter `{name}`, which was not given")]
    MissingParam { path: &'static str, name: String },
}

/// One embedded template.
#[derive(Debug, Clone, Copy)]
pub struct CellTemplate {
    /// Path relative to the project root.
    pub path: &'static str,
    /// The Python source.
    pub source: &'static str,
}

macro_rules! cell_file {
    ($dir:literal, $file:literal) => {
        CellTemplate {
            path: concat!("fixtures/cells/", $dir, "/", $file),
            source: include_str!(concat!("../../fixtures/cells/", $dir, "/", $file)),
        }
    };
}

/// The template for one cell of one model (the marker cells are shared by all models).
pub fn template(model: Model, cell: Cell) -> CellTemplate {
    match (cell, model) {
        (Cell::StoreMarker, _) => cell_file!("common", "store_marker.py"),
        (Cell::CheckMarker, _) => cell_file!("common", "check_marker.py"),
        (Cell::ScanDisk, _) => cell_file!("common", "scan_disk.py"),
        (Cell::BusyProgress, _) => cell_file!("common", "busy_progress.py"),
        (Cell::SlowCells, _) => cell_file!("common", "slow_cells.py"),
        (Cell::LoadModel, Model::SimTiny) => cell_file!("sim-tiny", "load_model.py"),
        (Cell::WriteFiles, Model::SimTiny) => cell_file!("sim-tiny", "write_files.py"),
        (Cell::UseModel, Model::SimTiny) => cell_file!("sim-tiny", "use_model.py"),
        (Cell::RecoverCheckpoint, Model::SimTiny) => {
            cell_file!("sim-tiny", "recover_checkpoint.py")
        }
        (Cell::LoadModel, Model::Qwen25_3bT4) => cell_file!("qwen2.5-3b-t4", "load_model.py"),
        (Cell::WriteFiles, Model::Qwen25_3bT4) => cell_file!("qwen2.5-3b-t4", "write_files.py"),
        (Cell::UseModel, Model::Qwen25_3bT4) => cell_file!("qwen2.5-3b-t4", "use_model.py"),
        (Cell::RecoverCheckpoint, Model::Qwen25_3bT4) => {
            cell_file!("qwen2.5-3b-t4", "recover_checkpoint.py")
        }
    }
}

/// The values a run can hand to its cells, by parameter name.
pub type CellValues = BTreeMap<String, Value>;

impl CellTemplate {
    /// The parameter names from the `# params:` header line.
    pub fn declared_params(&self) -> Result<Vec<&'static str>, CellTemplateError> {
        let line = self
            .source
            .lines()
            .take_while(|l| l.starts_with('#'))
            .find_map(|l| l.strip_prefix("# params:"))
            .ok_or(CellTemplateError::NoParamsHeader { path: self.path })?;
        Ok(line
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect())
    }

    /// The code to execute: the template, then one call of `_wsgate_cell` with exactly the
    /// declared parameters taken from `values`, as base64-encoded JSON.
    pub fn render(&self, values: &CellValues) -> Result<String, CellTemplateError> {
        if !self.source.contains("def _wsgate_cell(params):") {
            return Err(CellTemplateError::NoEntryPoint { path: self.path });
        }
        let mut params = serde_json::Map::new();
        for name in self.declared_params()? {
            let value = values
                .get(name)
                .ok_or_else(|| CellTemplateError::MissingParam {
                    path: self.path,
                    name: name.to_owned(),
                })?;
            params.insert(name.to_owned(), value.clone());
        }
        let blob = encode_params(&Value::Object(params));
        Ok(format!(
            "{}\ntry:\n    _wsgate_cell(__import__(\"json\").loads(__import__(\"base64\").b64decode(\"{blob}\").decode(\"utf-8\")))\nfinally:\n    del _wsgate_cell\n",
            self.source.trim_end()
        ))
    }
}

/// The base64 text a set of parameters travels as (also a needle for the disk scan).
pub fn encode_params(params: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(params.to_string())
}

/// The one line a cell prints its result on.
pub const RESULT_PREFIX: &str = "WSGATE-RESULT ";

/// The JSON on the last `WSGATE-RESULT` line of a cell's stdout.
pub fn parse_result(stdout: &str) -> Option<Value> {
    stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))
        .and_then(|json| serde_json::from_str(json).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all_templates() -> Vec<CellTemplate> {
        let mut out = Vec::new();
        for model in [Model::SimTiny, Model::Qwen25_3bT4] {
            for cell in Cell::ALL {
                out.push(template(model, cell));
            }
        }
        out
    }

    /// Every `params["name"]` a template reads.
    fn used_params(source: &str) -> Vec<String> {
        source
            .split("params[\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_template_declares_what_it_reads_and_reads_what_it_declares() {
        for t in all_templates() {
            let declared = t.declared_params().unwrap();
            let used = used_params(t.source);
            for name in &used {
                assert!(
                    declared.contains(&name.as_str()),
                    "{}: reads undeclared `{name}`",
                    t.path
                );
            }
            for name in &declared {
                assert!(
                    used.iter().any(|u| u == name),
                    "{}: declares unused `{name}`",
                    t.path
                );
            }
            assert!(t.source.contains("def _wsgate_cell(params):"), "{}", t.path);
            let first = t.source.lines().next().unwrap();
            assert_eq!(
                first.strip_prefix("# wsgate cell: "),
                Some(t.path.rsplit('/').next().unwrap().trim_end_matches(".py")),
                "{}",
                t.path
            );
        }
    }

    #[test]
    fn values_never_appear_in_the_rendered_code() {
        let hostile = "x\"); import os; os.system('boom') #\n'''\\";
        let values: CellValues = [
            (
                "files".to_owned(),
                json!({"input": hostile, "checkpoint": "c", "output": "o"}),
            ),
            ("seed".to_owned(), json!(7)),
        ]
        .into_iter()
        .collect();
        let code = template(Model::SimTiny, Cell::WriteFiles)
            .render(&values)
            .unwrap();
        assert!(!code.contains(hostile));
        assert!(!code.contains("boom"));
        let blob = blob_of(&code);
        assert!(
            blob.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        );
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap();
        let back: Value = serde_json::from_slice(&decoded).unwrap();
        assert_eq!(
            back,
            json!({"files": {"input": hostile, "checkpoint": "c", "output": "o"}, "seed": 7})
        );
    }

    /// The base64 parameters a rendered cell decodes.
    fn blob_of(code: &str) -> &str {
        code.split("b64decode(\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
    }

    #[test]
    fn only_declared_params_are_passed_and_missing_ones_are_named() {
        let values: CellValues = [
            ("nonce_hex".to_owned(), json!("00ff")),
            ("files".to_owned(), json!({})),
        ]
        .into_iter()
        .collect();
        let code = template(Model::SimTiny, Cell::StoreMarker)
            .render(&values)
            .unwrap();
        let blob = blob_of(&code);
        assert_eq!(blob, encode_params(&json!({"nonce_hex": "00ff"})));

        let err = template(Model::SimTiny, Cell::LoadModel)
            .render(&values)
            .unwrap_err();
        assert!(err.to_string().contains("`seed`"), "{err}");
    }

    #[test]
    fn the_last_result_line_wins() {
        let out = "noise\nWSGATE-RESULT {\"a\": 1}\nmore\nWSGATE-RESULT {\"a\": 2}\n";
        assert_eq!(parse_result(out), Some(json!({"a": 2})));
        assert_eq!(parse_result("nothing"), None);
    }
}
