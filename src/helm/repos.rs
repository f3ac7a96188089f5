//! Chart repositories whose URL carries credentials
//! (`https://user:token@charts.example.com`). Passed as `--repo URL`, the
//! token would sit in helm's argv, readable by every local user in `ps`. So
//! such a repository is added once per run, with the password on helm's
//! stdin (`helm repo add NAME URL --username USER --password-stdin`, helm's
//! pkg/cmd/repo_add.go), to a repository config in a private temporary
//! directory (0700; helm writes the file 0600), and charts are named
//! `NAME/CHART` with `--repository-config`/`--repository-cache` pointing
//! there. The directory is removed when the run ends. The username stays in
//! argv (helm has no other way to take it); the secret never does.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A repository URL split into the URL helm may see and its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentialed {
    /// The URL without `user:password@`.
    pub url: String,
    pub username: String,
    pub password: String,
}

/// `Some` when `url` has a `user:password@` (or `user@`) part in its
/// authority; user and password are percent-decoded as URL parsers do.
pub fn split_credentials(url: &str) -> Option<Credentialed> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, host) = authority.rsplit_once('@')?;
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    Some(Credentialed {
        url: format!("{scheme}://{host}{tail}"),
        username: percent_decode(user),
        password: percent_decode(password),
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The name a credentialed repository is added under: stable for its URL
/// and user, so one run adds it once.
pub fn repo_name(repo: &Credentialed) -> String {
    let digest = Sha256::digest(format!("{}\n{}", repo.url, repo.username));
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("bootstrap-{hex}")
}

/// Where helm finds the added repositories: `--repository-config` and
/// `--repository-cache` for every command naming one of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRepo {
    pub name: String,
    pub config: PathBuf,
    pub cache: PathBuf,
}

/// The private directory of one run's repository config.
pub struct RepoDir {
    dir: tempfile::TempDir,
}

impl RepoDir {
    /// A new directory only the current user can enter (0700).
    pub fn new() -> std::io::Result<RepoDir> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix(&crate::child::temp_prefix("helm-repos"))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(RepoDir { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn local(&self, name: String) -> LocalRepo {
        LocalRepo {
            name,
            config: self.dir.path().join("repositories.yaml"),
            cache: self.dir.path().join("cache"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_split_from_the_url() {
        assert_eq!(
            split_credentials("https://robot:s3cr%40t@charts.example.com/stable?x=1"),
            Some(Credentialed {
                url: "https://charts.example.com/stable?x=1".into(),
                username: "robot".into(),
                password: "s3cr@t".into(),
            })
        );
        assert_eq!(
            split_credentials("https://token@charts.example.com").map(|c| (c.username, c.password)),
            Some(("token".into(), String::new()))
        );
    }

    #[test]
    fn urls_without_credentials_are_left_alone() {
        assert_eq!(split_credentials("https://charts.jetstack.io"), None);
        // An @ in the path is not a user.
        assert_eq!(split_credentials("https://example.com/a@b"), None);
        assert_eq!(split_credentials("not a url"), None);
    }

    #[test]
    fn a_repository_has_one_name_per_url_and_user() {
        let a = split_credentials("https://u:p@charts.example.com").unwrap();
        let b = split_credentials("https://u:other@charts.example.com").unwrap();
        let c = split_credentials("https://v:p@charts.example.com").unwrap();
        assert_eq!(repo_name(&a), repo_name(&b));
        assert_ne!(repo_name(&a), repo_name(&c));
        assert!(repo_name(&a).starts_with("bootstrap-"));
    }

    #[test]
    fn the_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = RepoDir::new().unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
