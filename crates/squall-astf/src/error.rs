//! Load errors: every problem in a profile is reported with the JSON path of the field
//! at fault (`templates[0].client_program: unknown program "p9"`).

use std::fmt;

/// One problem found in a profile, located by its JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// JSON path such as `programs[1].commands[3].buf` (`.` for the document root).
    pub path: String,
    /// What is wrong, in words.
    pub message: String,
}

impl ProfileError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ProfileError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a profile could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// The file could not be read.
    Io { file: String, message: String },
    /// The text is not JSON.
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// The JSON is not a valid profile: every error found (at least one).
    Invalid(Vec<ProfileError>),
}

impl LoadError {
    /// The profile errors (empty for I/O and syntax errors).
    pub fn errors(&self) -> &[ProfileError] {
        match self {
            LoadError::Invalid(v) => v,
            _ => &[],
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io { file, message } => write!(f, "cannot read profile {file}: {message}"),
            LoadError::Syntax {
                line,
                column,
                message,
            } => {
                write!(
                    f,
                    "profile is not valid JSON (line {line}, column {column}): {message}"
                )
            }
            LoadError::Invalid(errs) => {
                write!(
                    f,
                    "invalid profile ({} error{})",
                    errs.len(),
                    if errs.len() == 1 { "" } else { "s" }
                )?;
                for e in errs {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Collects errors while validating.
#[derive(Default, Debug)]
pub(crate) struct Errors {
    pub list: Vec<ProfileError>,
}

impl Errors {
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.list.push(ProfileError::new(path, message));
    }
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}
