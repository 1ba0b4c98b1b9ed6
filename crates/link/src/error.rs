//! The one error type of this crate: a link description that cannot be used.

use std::fmt;

/// Why a link description was refused. Every variant says what was found
/// and what was expected, so a scenario author can fix the text directly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkConfigError {
    /// A word of netem-like text could not be read.
    Syntax {
        /// 1-based position of the word in the text; one past the last word
        /// when the text ended too early.
        position: usize,
        /// The word, or `<end of text>`.
        token: String,
        expected: String,
    },
    /// The text asks for a netem feature this model does not implement.
    Unsupported {
        position: usize,
        token: String,
        feature: &'static str,
        hint: &'static str,
    },
    /// A value is out of range or contradicts another.
    Invalid { field: &'static str, reason: String },
}

impl LinkConfigError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        LinkConfigError::Invalid {
            field,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for LinkConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkConfigError::Syntax {
                position,
                token,
                expected,
            } => write!(
                f,
                "link text, word {position} ({token:?}): expected {expected}"
            ),
            LinkConfigError::Unsupported {
                position,
                token,
                feature,
                hint,
            } => write!(
                f,
                "link text, word {position} ({token:?}): {feature} is not implemented; {hint}"
            ),
            LinkConfigError::Invalid { field, reason } => {
                write!(f, "link config, {field}: {reason}")
            }
        }
    }
}

impl std::error::Error for LinkConfigError {}
