//! Reading a config file: the discovered `paddock.toml` of a project, a named TOML file, or
//! an SRT settings file (`.json`, converted with notes).

use std::path::Path;

use paddock_policy::{Format, Policy, load_str};

use crate::Error;

/// Whether a discovered `paddock.toml` is a config: a regular file, and not the empty
/// mode-0000 placeholder a concurrent run in the same project made for the missing name
/// (which means: no config).
pub fn is_config(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|m| m.is_file() && !(m.len() == 0 && m.permissions().mode() & 0o777 == 0))
}

/// The policy in `file`, with the notes its conversion made.
pub fn read(file: &Path) -> Result<(Policy, Vec<String>), Error> {
    let unreadable = |e: std::io::Error| Error::ConfigFile {
        file: file.to_path_buf(),
        message: format!("cannot read the config file ({e})"),
        fix: "check that it exists and is readable".into(),
    };
    let meta = std::fs::metadata(file).map_err(unreadable)?;
    if meta.len() > paddock_policy::MAX_CONFIG_BYTES as u64 {
        return Err(Error::ConfigFile {
            file: file.to_path_buf(),
            message: "the config file is larger than paddock reads".into(),
            fix: format!("keep it under {} bytes", paddock_policy::MAX_CONFIG_BYTES),
        });
    }
    let bytes = std::fs::read(file).map_err(unreadable)?;
    let text = String::from_utf8(bytes).map_err(|_| Error::ConfigFile {
        file: file.to_path_buf(),
        message: "the config file is not UTF-8".into(),
        fix: "save it as UTF-8".into(),
    })?;
    parse(&text, file)
}

/// The policy in `text`, read as the file `file` would be (`.json`: SRT settings).
pub fn parse(text: &str, file: &Path) -> Result<(Policy, Vec<String>), Error> {
    if file.extension().is_some_and(|e| e == "json") {
        Ok(paddock_policy::srt::convert(text, file)?)
    } else {
        Ok((load_str(text, file, Format::Toml)?, Vec::new()))
    }
}
