//! The one error type of the lab: every failure is a sentence a user can act
//! on, printed on one line by the CLI.

use std::fmt;
use std::path::PathBuf;

/// Why a scenario could not be loaded, expanded or run.
#[derive(Clone, Debug, PartialEq)]
pub enum LabError {
    /// The scenario file could not be read.
    Read { path: PathBuf, reason: String },
    /// The scenario file is not valid TOML or does not match the schema.
    /// `line`/`column` are 1-based when the parser knew where.
    Parse {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    /// The scenario parsed but says something inconsistent.
    Invalid { path: PathBuf, message: String },
    /// A transport preset string names nothing known.
    UnknownPreset {
        variant: String,
        preset: String,
        reason: String,
    },
    /// Building or running one simulation failed.
    Run { run: usize, message: String },
    /// Writing results failed.
    Write { path: PathBuf, reason: String },
    /// A command-line selection (variants, points, run index) matches nothing.
    Selection(String),
    /// A sweep shard could not be written, read or merged (the message
    /// names the directory and what is wrong).
    Shard(String),
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabError::Read { path, reason } => {
                write!(f, "cannot read scenario {}: {reason}", path.display())
            }
            LabError::Parse {
                path,
                line,
                column,
                message,
            } => {
                write!(f, "{}", path.display())?;
                if let Some(l) = line {
                    write!(f, ":{l}")?;
                    if let Some(c) = column {
                        write!(f, ":{c}")?;
                    }
                }
                write!(f, ": {message}")
            }
            LabError::Invalid { path, message } => write!(f, "{}: {message}", path.display()),
            LabError::UnknownPreset {
                variant,
                preset,
                reason,
            } => write!(f, "variant {variant:?}: preset {preset:?}: {reason}"),
            LabError::Run { run, message } => write!(f, "run {run}: {message}"),
            LabError::Write { path, reason } => {
                write!(f, "cannot write {}: {reason}", path.display())
            }
            LabError::Selection(m) => f.write_str(m),
            LabError::Shard(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LabError {}
