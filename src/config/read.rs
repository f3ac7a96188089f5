//! Reading one config file as text: only a regular file (or a symlink to
//! one) is read, so a FIFO never blocks a command and a directory or socket
//! named like a config file is an error naming it, never skipped; text that
//! is not UTF-8 is reported at its line.

use std::path::Path;

/// Why a config file could not be read, in the file's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub message: String,
    /// Where in the file the problem is, when it is in the content.
    pub line: Option<u64>,
    pub column: Option<u64>,
}

impl Unreadable {
    fn new(message: impl Into<String>) -> Unreadable {
        Unreadable {
            message: message.into(),
            line: None,
            column: None,
        }
    }

    /// The message about `noun` (`--values file`): `cannot read the NOUN: …`,
    /// `the NOUN is a FIFO …`.
    pub(crate) fn about(mut self, noun: &str) -> Unreadable {
        self.message = match self.message.strip_prefix("cannot read: ") {
            Some(rest) => format!("cannot read the {noun}: {rest}"),
            None => format!("the {noun} {}", self.message),
        };
        self
    }

    /// As a validation problem of `shown`.
    pub(crate) fn problem(&self, shown: &Path) -> crate::error::Problem {
        let problem = crate::error::Problem::new(self.message.clone()).file(shown);
        match self.line {
            Some(line) => problem.at(line, self.column.unwrap_or(1)),
            None => problem,
        }
    }
}

/// What a non-regular file is, in words.
pub(crate) fn kind(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "a device"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// The text of `path`, a regular file or a symlink leading to one.
pub(crate) fn text(path: &Path) -> Result<String, Unreadable> {
    let link = std::fs::symlink_metadata(path)
        .map_err(|e| Unreadable::new(format!("cannot read: {e}")))?;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if link.file_type().is_symlink() => {
            return Err(Unreadable::new(format!(
                "cannot read: {e}; it is a symlink that leads nowhere (dangling, or a loop): fix or remove it"
            )));
        }
        Err(e) => return Err(Unreadable::new(format!("cannot read: {e}"))),
    };
    if !meta.file_type().is_file() {
        let via = if link.file_type().is_symlink() {
            "a symlink to "
        } else {
            ""
        };
        return Err(Unreadable::new(format!(
            "is {via}{}, not a file: a config file must be a regular file or a symlink to one",
            kind(meta.file_type())
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| Unreadable::new(format!("cannot read: {e}")))?;
    utf8(bytes)
}

/// `bytes` as text, or where the first byte that is not UTF-8 is.
pub(crate) fn utf8(bytes: Vec<u8>) -> Result<String, Unreadable> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() as u64 + 1;
        let line_start = bytes[..at]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&bytes[line_start..at]).chars().count() as u64 + 1;
        Unreadable {
            message: format!(
                "is not UTF-8 text (byte 0x{:02x} at line {line}, column {column}): YAML files must be UTF-8; is it a binary file?",
                bytes[at]
            ),
            line: Some(line),
            column: Some(column),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_and_a_symlink_to_one_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "name: a\n").unwrap();
        std::os::unix::fs::symlink(&file, dir.path().join("b.yaml")).unwrap();
        assert_eq!(text(&file).unwrap(), "name: a\n");
        assert_eq!(text(&dir.path().join("b.yaml")).unwrap(), "name: a\n");
    }

    #[test]
    fn a_fifo_is_refused_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.yaml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo(3) reads the NUL-terminated path only.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening a FIFO with no writer blocks forever: this returns at once.
        let e = text(&fifo).unwrap_err();
        assert_eq!(
            e.message,
            "is a FIFO (named pipe), not a file: a config file must be a regular file or a symlink to one"
        );
        std::os::unix::fs::symlink(&fifo, dir.path().join("y.yaml")).unwrap();
        assert!(
            text(&dir.path().join("y.yaml"))
                .unwrap_err()
                .message
                .starts_with("is a symlink to a FIFO (named pipe), not a file")
        );
    }

    #[test]
    fn a_directory_and_a_socket_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("d.yaml");
        std::fs::create_dir(&sub).unwrap();
        assert!(
            text(&sub)
                .unwrap_err()
                .message
                .starts_with("is a directory, not a file")
        );
        let sock = dir.path().join("s.yaml");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(
            text(&sock)
                .unwrap_err()
                .message
                .starts_with("is a socket, not a file")
        );
    }

    #[test]
    fn a_dangling_symlink_is_named_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("l.yaml");
        std::os::unix::fs::symlink("gone.yaml", &link).unwrap();
        let e = text(&link).unwrap_err();
        assert_eq!(
            e.message,
            "cannot read: No such file or directory (os error 2); it is a symlink that leads nowhere (dangling, or a loop): fix or remove it"
        );
    }

    #[test]
    fn text_that_is_not_utf8_is_located() {
        let e = utf8(b"name: a\nvalues: {x: \"\xff\"}\n".to_vec()).unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(14)));
        assert!(
            e.message
                .starts_with("is not UTF-8 text (byte 0xff at line 2, column 14)")
        );
    }
}
