//! Paths as written, made plain without the file system:
//! `releases/../../values.yaml` is `values.yaml`, as a person reads it.

use std::path::{Component, Path, PathBuf};

/// `path` with `.` dropped and each `..` taking the name before it away
/// (a leading `..` stays; nothing climbs above the root).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) => {}
                _ => out.push(part),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_are_taken_out() {
        let n = |p: &str| normalize(Path::new(p)).display().to_string();
        assert_eq!(
            n("bootstrap/config/releases/../../values.yaml"),
            "bootstrap/values.yaml"
        );
        assert_eq!(n("../x/./y"), "../x/y");
        assert_eq!(n("/a/../../b"), "/b");
        assert_eq!(n("a/.."), ".");
    }
}
